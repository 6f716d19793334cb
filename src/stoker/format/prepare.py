"""``prepare``: index the shards of a dataset and write its ``.nv-meta`` files atomically.

Shards are scanned in parallel processes (headers only, one sequential pass each); each shard's
result is kept in the work folder (:mod:`stoker.format.prepare_work`) as soon as it is done, and
the index rows of each chunk of consecutive shards in a chunk file
(:mod:`stoker.format.index_chunks`), so a re-run after a crash skips finished work. The main
process merges the chunks into ``index.sqlite`` (rows copied by SQLite, indexes built once) and
writes the ``.tar.idx`` files, all under temporary names. Nothing is published until everything
succeeded, and ``.info.json`` (the "prepared" marker) comes last, so an interrupted or failed
prepare leaves the dataset as it was. ``index.uuid`` is derived from the indexed content, so the
same shards give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stoker.errors import AlreadyPreparedError, ConfigError, FormatError
from stoker.format.dataset_config import parse_dataset_config
from stoker.format.index_chunks import (
    ChunkBuilder,
    open_chunk,
    plan_chunks,
    read_summaries,
)
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    META_DIR,
    is_prepared,
    read_info,
)
from stoker.format.parallel import ordered_map
from stoker.format.pending import TMP_MARK as TMP_MARK
from stoker.format.pending import PendingPrepare as PendingPrepare
from stoker.format.pending import PrepareReport as PrepareReport
from stoker.format.pending import SplitSummary as SplitSummary
from stoker.format.prepare_lock import PrepareLock
from stoker.format.progress import Progress, StepClock, silent_step
from stoker.format.splits import SPLIT_NAMES as SPLIT_NAMES
from stoker.format.splits import parse_split_ratio as parse_split_ratio
from stoker.format.splits import split_by_patterns as split_by_patterns
from stoker.format.splits import split_by_ratio as split_by_ratio
from stoker.format.sqlite_index import DuplicateKeyError
from stoker.storage import Store, open_store

SHARD_SUFFIXES = (".tar", ".tgz")


def find_shards(store: Store, exclude: str | None = None) -> list[str]:
    """All shard files under the dataset, minus those matching the regex ``exclude``.

    As ``energon prepare`` finds them: ``**/*.tar`` and ``**/*.tgz`` outside hidden folders, in
    path-component order (so ``a/b.tar`` comes before ``a-b.tar``).
    """
    names = sorted(
        (
            name
            for name in store.list_files()
            if name.endswith(SHARD_SUFFIXES)
            and TMP_MARK not in name
            and not any(part.startswith(".") for part in name.split("/"))
        ),
        key=lambda name: name.split("/"),
    )
    if exclude:
        try:
            pattern = re.compile(exclude)
        except re.error as e:
            raise ConfigError(f"invalid --exclude regex {exclude!r}: {e}.") from None
        names = [name for name in names if not pattern.search(name)]
    return names


def index_shards(
    path: str,
    *,
    exclude: str | None = None,
    tar_index_only: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
    shards: Sequence[str] | None = None,
    clean_tmp: bool = True,
    sample_index: bool = True,
    tmp_dir: str | None = None,
) -> PendingPrepare:
    """Scan every shard of the dataset at ``path`` into temporary index files.

    Shards whose results a killed earlier run left in the work folder are not read again;
    ``clean_tmp`` removes the temporary files such a run left (off while other ranks write).
    ``sample_index=False`` builds no ``index.sqlite`` (loading needs only the ``.tar.idx``
    files; joins, aux datasets and media metadata need it, and duplicate keys go unnoticed).
    ``tmp_dir``: where ``index.sqlite`` is built when ``path`` is remote (Energon's
    ``--tmp-path``; default: the system's temporary folder), before it is uploaded.

    The dataset's prepare lock (:mod:`stoker.format.prepare_lock`) is held until the returned
    :class:`PendingPrepare` is published or discarded.

    Raises:
        AlreadyPreparedError: the dataset has metadata and ``overwrite`` is False.
        PrepareLockedError: another prepare of the dataset is running.
        StokerError: no shards, unreadable or invalid shards, duplicate keys.
    """
    store = open_store(path)
    names = select_shards(store, path, exclude, tar_index_only, overwrite, shards)
    lock = PrepareLock(store).acquire()
    try:
        if clean_tmp:
            remove_stale_tmp(store)
    except BaseException:
        lock.release()
        raise
    pending = PendingPrepare(store, names, tar_index_only, sample_index, lock)
    try:
        _index_into(pending, num_workers, progress, tmp_dir)
    except BaseException:
        pending.discard()
        raise
    return pending


def select_shards(
    store: Store,
    path: str,
    exclude: str | None,
    tar_index_only: bool,
    overwrite: bool,
    shards: Sequence[str] | None = None,
) -> list[str]:
    """The shards ``prepare`` indexes, in order; raises if there are none or the dataset is
    prepared already (and not ``overwrite``)."""
    if not store.is_dir(""):
        raise ConfigError(
            "not a folder.", path=path, hint="Pass the folder that holds the dataset's shards."
        )
    if tar_index_only:
        names = list(read_info(store).shard_counts)
        if exclude:
            names = [s for s in names if not re.search(exclude, s)]
    else:
        if is_prepared(store) and not overwrite:
            raise AlreadyPreparedError(
                "the dataset is already prepared.",
                path=path,
                hint="Pass --force-overwrite to prepare it again.",
            )
        # ``shards``: an explicit list (in its order), as Energon's prepare_dataset takes it
        names = find_shards(store, exclude) if shards is None else list(shards)
    if not names:
        compressed = [name for name in store.list_files() if name.endswith(".tar.gz")]
        raise FormatError(
            "no shards found (no *.tar files"
            + (f" left after --exclude {exclude!r}" if exclude else "")
            + ").",
            path=path,
            hint=(
                f"{len(compressed)} .tar.gz files were found: random access into gzip is "
                "impossible, so decompress them (`gunzip`) or re-shard with `stoker pack`."
                if compressed
                else "Point prepare at the folder with the .tar shards, or make shards from a "
                "folder of files with `stoker pack`."
            ),
        )
    return names


def prepare_dataset(
    path: str,
    *,
    split_ratio: Sequence[tuple[str, float]] | str | None = None,
    split_parts: Sequence[tuple[str, str]] | None = None,
    exclude: str | None = None,
    shuffle_tars: bool = False,
    shuffle_seed: int = 42,
    tar_index_only: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
    overwrite: bool = False,
    dataset_yaml: dict[str, Any] | None = None,
    dataset_yaml_name: str = DEFAULT_DATASET_YAML,
    sample_index: bool = True,
) -> PrepareReport:
    """Prepare the dataset at ``path`` for loading (what ``stoker prepare`` does).

    ``sample_index=False`` skips ``index.sqlite`` (see :func:`index_shards`).

    Example:
        >>> from stoker.format.pack import pack
        >>> _ = pack("raw", "my-wds", samples_per_shard=10)
        >>> report = prepare_dataset(
        ...     "my-wds",
        ...     split_ratio="8,1,1",
        ...     dataset_yaml={
        ...         "sample_type": {"__module__": "stoker", "__class__": "CaptioningSample"},
        ...         "field_map": {"image": "jpg", "caption": "txt"},
        ...     },
        ... )
        >>> report.samples
        60
    """
    if isinstance(split_ratio, str):
        split_ratio = parse_split_ratio(split_ratio)
    if dataset_yaml is not None:
        parse_dataset_config(dataset_yaml, f"{path}/{META_DIR}/{dataset_yaml_name}")
    with index_shards(
        path,
        exclude=exclude,
        tar_index_only=tar_index_only,
        num_workers=num_workers,
        progress=progress,
        overwrite=overwrite,
        sample_index=sample_index,
    ) as pending:
        return pending.publish(
            split_ratio=split_ratio,
            split_parts=split_parts,
            shuffle_seed=shuffle_seed if shuffle_tars else None,
            dataset_yaml=dataset_yaml,
            dataset_yaml_name=dataset_yaml_name,
        )


def remove_stale_tmp(store: Store) -> None:
    """Remove the temporary files (``*.stoker-tmp-*``) an interrupted prepare left."""
    for name in store.list_files():
        if TMP_MARK in name:
            store.remove(name)


def _index_into(
    pending: PendingPrepare, num_workers: int | None, progress: bool, tmp_dir: str | None = None
) -> None:
    """Build every chunk file in worker processes (or find it built), then merge them in order."""
    writer = pending.open_index_writer(tmp_dir)
    chunks = plan_chunks(pending.shards)
    builder = ChunkBuilder(pending.work, pending.sample_index, tmp_dir)
    clock = StepClock(pending.timings)
    try:
        with Progress(len(pending.shards), "Indexing shards", enabled=progress) as bar:
            built_chunks = ordered_map(builder, chunks, num_workers, len(chunks))
            for built in clock.timed("wait", built_chunks):
                with open_chunk(pending.work, built) as path:
                    if writer is not None:
                        with clock("rows"):
                            writer.add_chunk(path)
                    with clock("shards"):
                        summaries = read_summaries(path)
                with clock("shards"):
                    resumed = built.resumed == len(built.chunk.names)
                    for shard in summaries:
                        pending.add_shard(shard, resumed)
                bar.update(len(summaries), samples=built.samples)
        if writer is not None:
            samples = sum(pending.counts.values())
            note = f"Building the indexes of index.sqlite ({samples} samples; sorts on one process"
            try:
                with clock("indexes"), silent_step(f"{note}, no progress until done)", progress):
                    writer.close()
            except DuplicateKeyError as e:
                raise pending.duplicate_error(e) from None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if pending.tar_index_only:
        pending.check_counts_unchanged()
