"""``pack``: turn a folder of loose files, or a JSONL file, into WebDataset tar shards.

Files are grouped into samples by Energon's rule (:func:`stoker.format.tar.split_name`): the key is
the relative path up to the first dot of the base name, the part is the rest. The shard cuts are
planned first from exact member sizes (a pure function of integers, :func:`plan_shards`), then each
shard is written under a temporary name and all are renamed into place only when every one
succeeded, so a failed or interrupted run leaves ``out`` as it was. Same input, same bytes.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field

from stoker.errors import ConfigError
from stoker.format.distributed import (
    World,
    assign_shards,
    distributed_world,
    gather,
    on_main_rank,
    run_step,
)
from stoker.format.pack.collect import JSONL_KEY_WIDTH, collect_samples
from stoker.format.pack.output import Output, check_names, check_out, shard_name
from stoker.format.pack.plan import plan_shards, sample_tar_bytes, shard_file_bytes
from stoker.format.pack.samples import Part, Sample, SkippedFile
from stoker.format.pack.write import Sources
from stoker.format.pack.write import write_shard as _write_shard
from stoker.format.pending import TMP_MARK
from stoker.format.progress import Progress

__all__ = [
    "DEFAULT_SAMPLES_PER_SHARD",
    "JSONL_KEY_WIDTH",
    "PackReport",
    "Part",
    "Sample",
    "SkippedFile",
    "collect_samples",
    "pack",
    "plan_shards",
    "sample_tar_bytes",
    "shard_file_bytes",
]

DEFAULT_SAMPLES_PER_SHARD = 1000


@dataclass
class PackReport:
    """What ``pack`` did, for the CLI to print (or ``--json``)."""

    out: str
    #: Shard file names, relative to ``out``, in order.
    shards: list[str]
    samples: int
    bytes: int
    seconds: float
    part_names: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)


def _check_options(samples_per_shard: int | None, max_shard_bytes: int | None, prefix: str) -> None:
    for name, value in (
        ("samples_per_shard", samples_per_shard),
        ("max_shard_bytes", max_shard_bytes),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"invalid {name}={value}: it must be at least 1.")
    if "/" in prefix or os.sep in prefix or prefix.startswith(".") or TMP_MARK in prefix:
        raise ConfigError(
            f"invalid shard_prefix={prefix!r}.",
            hint="Use a plain file-name prefix such as 'shard-' or 'train-' (no '/', no leading "
            "'.').",
        )


def _write_all(
    output: Output,
    samples: Sequence[Sample],
    ends: Sequence[int],
    progress: bool,
    world: World | None = None,
) -> None:
    """Write every shard, or with ``world`` this rank's share (all names are still recorded)."""
    starts = [0, *ends[:-1]]
    mine = set(
        assign_shards(range(len(ends)), world.rank, world.size) if world else range(len(ends))
    )
    total = sum(ends[i] - starts[i] for i in mine)
    sources = Sources()
    bar = Progress(total, "Packing samples", world=world, enabled=progress, unit="sample")
    with closing(sources), bar:
        for i, end in enumerate(ends):
            path = output.new_shard()
            if i in mine:
                # Looked up in this module (not .write), so that tests can patch it here.
                _write_shard(path, samples[starts[i] : end], sources, bar.update)


def _write_distributed(
    world: World, out: str, prefix: str, old: Sequence[str], write: Callable[[Output], None]
) -> list[str]:
    """Each rank writes its shards; rank 0 publishes them all (or discards them all)."""
    main = Output(out, prefix) if world.is_main else None  # rank 0 removes a killed run's files
    token = gather(world, main.token if main else "")[0]
    output = main or Output(out, prefix, token=token, clean=False)
    try:
        run_step(world, lambda: write(output))
    except BaseException:
        if world.is_main:  # every rank has stopped writing
            output.discard()
        raise
    on_main_rank(world, lambda: output.publish(old))
    return output.names


def pack(
    src: str,
    out: str,
    *,
    samples_per_shard: int | None = None,
    max_shard_bytes: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    shard_prefix: str = "shard-",
    progress: bool = False,
    overwrite: bool = False,
    distributed: bool = False,
) -> PackReport:
    """Pack a folder of files or a ``.jsonl`` file into tar shards ``out/<prefix>000000.tar``, ...

    Without limits, shards hold 1000 samples. ``shuffle`` orders samples by ``seed``. Nothing in
    ``out`` changes unless every shard was written; ``overwrite`` replaces the shards an earlier
    ``pack`` wrote (listed in ``out/.stoker-pack-manifest.json``), their ``.tar.idx`` and
    ``.nv-meta`` (run ``prepare`` again afterwards); files ``pack`` did not write are never
    removed, and one in the way of a new shard is an error. With ``distributed``, every rank of a
    torch.distributed job (torchrun, srun) calls ``pack`` alike and writes its share of the shards
    (the same bytes as one process writes); rank 0 publishes them.

    Example:
        >>> report = pack("raw", "shards", max_shard_bytes=64 * 1024)
        >>> report.shards[:2]
        ['shard-000000.tar', 'shard-000001.tar']

    Raises:
        ConfigError: bad arguments, no samples, or ``out`` holds shards and not ``overwrite``.
        FormatError: a JSONL line is not valid JSON.
        StorageError: a source file could not be read.
    """
    start = time.perf_counter()
    if samples_per_shard is None and max_shard_bytes is None:
        samples_per_shard = DEFAULT_SAMPLES_PER_SHARD
    _check_options(samples_per_shard, max_shard_bytes, shard_prefix)

    def plan() -> tuple[list[str], list[Sample], list[SkippedFile], list[int]]:
        old = check_out(src, out, overwrite)
        samples, skipped = collect_samples(src)
        if shuffle:
            random.Random(seed).shuffle(samples)
        sizes = [sample_tar_bytes(s) for s in samples]
        ends = plan_shards(sizes, samples_per_shard, max_shard_bytes)
        if os.path.isdir(out):
            check_names(out, [shard_name(shard_prefix, i) for i in range(len(ends))], old)
        return old, samples, skipped, list(ends)

    if distributed:
        with distributed_world() as world:
            # every rank plans alike; one rank's failure (e.g. unreadable source) stops all
            old, samples, skipped, ends = run_step(world, plan)
            names = _write_distributed(
                world,
                out,
                shard_prefix,
                old,
                lambda output: _write_all(output, samples, ends, progress, world),
            )
    else:
        old, samples, skipped, ends = plan()
        output = Output(out, shard_prefix)
        try:
            _write_all(output, samples, ends, progress)
            output.publish(old)
        except BaseException:
            output.discard()
            raise
        names = output.names
    return PackReport(
        out=out,
        shards=names,
        samples=len(samples),
        bytes=sum(os.path.getsize(os.path.join(out, name)) for name in names),
        seconds=time.perf_counter() - start,
        part_names=sorted({part.name for s in samples for part in s.parts}),
        skipped=skipped,
    )
