"""Distributed ``prepare``: every rank indexes its share of the shards into the work folder, with
the index rows of its chunks of shards (:mod:`stoker.format.index_chunks`), then rank 0 merges the
chunks and publishes the dataset, as a single-process run would.

A rank that dies can be started again alone with the same command (or all ranks can): the shards
it finished are kept in the work folder and not read again.

Example (under ``torchrun --nproc-per-node 8``)::

    from stoker.format.prepare_distributed import prepare_dataset_distributed

    report = prepare_dataset_distributed("/data/shards", split_ratio="8,1,1")
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

from stoker.format.distributed import (
    World,
    assign_shards,
    distributed_world,
    gather,
    on_main_rank,
    run_step,
)
from stoker.format.index_chunks import ChunkBuilder, discard_copy, plan_chunks
from stoker.format.parallel import ordered_map
from stoker.format.pending import PrepareReport
from stoker.format.prepare import prepare_dataset, remove_stale_tmp, select_shards
from stoker.format.prepare_lock import PrepareLock
from stoker.format.prepare_work import PrepareWork
from stoker.format.progress import Progress, summary_line
from stoker.storage import open_store


def scan_distributed(
    path: str,
    world: World,
    *,
    exclude: str | None = None,
    tar_index_only: bool = False,
    overwrite: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
    also: Callable[[PrepareWork], Callable[[str], object]] | None = None,
    sample_index: bool = True,
    lock: PrepareLock | None = None,
) -> int:
    """Phase 1 on every rank: index this rank's chunks of shards into the work folder (each
    shard's result, and the chunk file of the index rows); returns how many shards (of all
    ranks) were resumed from an earlier run rather than read.

    Rank ``r`` of ``N`` takes chunks ``r, r+N, ...`` of :func:`~stoker.format.index_chunks.
    plan_chunks`. ``also(work)`` gives a further per-shard step run over the same shards (e.g.
    probing media into the work folder). Raises on every rank if any rank failed. ``lock``:
    taken on rank 0 before any rank writes (another prepare of the dataset running fails every
    rank); the caller releases it after publishing.
    """
    store = open_store(path)

    def check() -> list[str]:
        names = select_shards(store, path, exclude, tar_index_only, overwrite)
        if world.is_main:  # no rank writes yet: safe to remove what a killed run left
            if lock is not None:
                lock.acquire()
            remove_stale_tmp(store)
        return names

    names = run_step(world, check)
    chunks = assign_shards(plan_chunks(names), world.rank, world.size)
    mine = [name for chunk in chunks for name in chunk.names]
    work = PrepareWork(store)

    def scan() -> tuple[int, int]:
        samples = resumed = 0
        builder = ChunkBuilder(work, sample_index)
        with Progress(len(mine), "Indexing shards", world=world, enabled=progress) as bar:
            for built in ordered_map(builder, chunks, num_workers, len(chunks)):
                discard_copy(built)  # rank 0 reads it from the store
                samples += built.samples
                resumed += built.resumed
                bar.update(len(built.chunk.names), samples=built.samples)
        if also is not None:
            probing = Progress(len(mine), "Probing media of shards", world=world, enabled=progress)
            with probing:
                for _ in ordered_map(also(work), mine, num_workers, len(mine)):
                    probing.update()
        return samples, resumed

    start = time.perf_counter()
    samples, resumed = run_step(world, scan)
    per_rank = gather(world, (len(mine), samples, time.perf_counter() - start, resumed))
    if progress and world.is_main:
        print(summary_line([r[:3] for r in per_rank], len(names)), file=sys.stderr, flush=True)
    return sum(r[3] for r in per_rank)


def prepare_dataset_distributed(
    path: str,
    *,
    exclude: str | None = None,
    tar_index_only: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
    world: World | None = None,
    **publish: Any,
) -> PrepareReport:
    """:func:`~stoker.format.prepare.prepare_dataset` spread over the ranks of a torch.distributed
    job; every rank calls it and every rank gets the report. ``publish`` takes the other
    arguments of ``prepare_dataset`` (``split_ratio``, ``dataset_yaml``, ...)."""
    lock = PrepareLock(open_store(path))  # taken on rank 0 only, by scan_distributed
    with distributed_world(world) as world, contextlib.closing(lock):
        resumed = scan_distributed(
            path,
            world,
            exclude=exclude,
            tar_index_only=tar_index_only,
            overwrite=overwrite,
            num_workers=num_workers,
            progress=progress,
            sample_index=publish.get("sample_index", True),
            lock=lock,
        )
        report = on_main_rank(
            world,
            lambda: prepare_dataset(
                path,
                exclude=exclude,
                tar_index_only=tar_index_only,
                num_workers=num_workers,
                progress=progress,
                overwrite=overwrite,
                **publish,
            ),
        )
    report.resumed_shards = resumed  # rank 0 loaded every shard: count the ranks' resumes
    return report
