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

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import yaml

from stoker.errors import AlreadyPreparedError, ConfigError, FormatError, StokerError
from stoker.format.dataset_config import parse_dataset_config
from stoker.format.fingerprints import FINGERPRINTS, encode_fingerprints
from stoker.format.index_chunks import (
    ChunkBuilder,
    ShardSummary,
    open_chunk,
    plan_chunks,
    read_summaries,
)
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    DEFAULT_SPLIT_CONFIG,
    INDEX_SQLITE,
    INDEX_UUID,
    INFO_JSON,
    META_DIR,
    DatasetInfo,
    SplitConfig,
    is_prepared,
    read_info,
)
from stoker.format.parallel import ordered_map
from stoker.format.prepare_lock import PrepareLock
from stoker.format.prepare_work import PrepareWork
from stoker.format.progress import Progress, format_seconds
from stoker.format.shard_scan import MAX_PARTS_REPORTED
from stoker.format.splits import SPLIT_NAMES as SPLIT_NAMES
from stoker.format.splits import parse_split_ratio as parse_split_ratio
from stoker.format.splits import split_by_patterns as split_by_patterns
from stoker.format.splits import split_by_ratio as split_by_ratio
from stoker.format.sqlite_index import DuplicateKeyError, SqliteIndexWriter
from stoker.format.tar_index import tar_index_name
from stoker.storage import Store, open_store

TMP_MARK = ".stoker-tmp-"
T = TypeVar("T")
SHARD_SUFFIXES = (".tar", ".tgz")


@dataclass(frozen=True)
class SplitSummary:
    name: str
    shards: int
    samples: int


@dataclass
class PrepareReport:
    """What ``prepare`` did, for the CLI to print (or ``--json``)."""

    path: str
    shards: int
    samples: int
    bytes: int
    seconds: float
    part_names: list[str]
    splits: list[SplitSummary] = field(default_factory=list)
    tar_index_only: bool = False
    dataset_yaml: str | None = None
    #: Shards whose index an earlier, interrupted run had kept (not read again).
    resumed_shards: int = 0


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


class PendingPrepare:
    """Shards indexed into temporary files, not yet published; a context manager.

    Leaving the ``with`` block without :meth:`publish` removes every temporary file.
    """

    def __init__(
        self,
        store: Store,
        shards: list[str],
        tar_index_only: bool,
        sample_index: bool = True,
        lock: PrepareLock | None = None,
    ) -> None:
        self.store = store
        #: Held until :meth:`discard` (which :meth:`publish`'s ``with`` block ends with).
        self.lock = lock
        self.shards = shards
        self.tar_index_only = tar_index_only
        #: Whether ``index.sqlite`` is built (``--no-sample-index`` turns it off).
        self.sample_index = sample_index
        self.counts: dict[str, int] = {}
        self.bytes = 0
        self.part_names: set[str] = set()
        self.fingerprints: dict[str, str] = {}
        self.resumed = 0
        self._token = uuid.uuid4().hex[:12]
        self._tmp: dict[str, str] = {}  # final name -> temporary name
        #: ``.tar.idx`` files written under temporary names: those of the first N shards (named
        #: by :meth:`tar_index_tmp`, not kept in ``_tmp``: 10^6 shards would cost ~200 MB).
        self._tar_indexes_written = 0
        self._start = time.perf_counter()
        self._sqlite_tmp: str | None = None
        self.work = PrepareWork(store)
        #: Hash of every shard's name, keys and offsets in order: the seed of ``index.uuid``.
        self.digest = hashlib.sha256()
        #: Seconds spent waiting for the user (the wizard's questions): not in the report's time.
        self.user_seconds = 0.0
        meta_dir = store.local_path(META_DIR)
        self._new_meta_dir = meta_dir if meta_dir and not os.path.isdir(meta_dir) else None
        #: Set when the user gave up (at a question): the work folder goes too.
        self.abandoned = False
        #: Seconds of each merge step (``wait`` for chunk files, ``rows``, ``shards``:
        #: ``.tar.idx`` files and summaries, ``indexes``), for benchmarks.
        self.timings: dict[str, float] = dict.fromkeys(("wait", "rows", "shards", "indexes"), 0.0)

    def tmp_name(self, final: str) -> str:
        tmp = f"{final}{TMP_MARK}{self._token}"
        self._tmp[final] = tmp
        return tmp

    def tar_index_tmp(self, shard: str) -> str:
        """The temporary name of the ``.tar.idx`` file of ``shard``."""
        return f"{tar_index_name(shard)}{TMP_MARK}{self._token}"

    def _written_tar_indexes(self) -> Iterator[tuple[str, str]]:
        for shard in self.shards[: self._tar_indexes_written]:
            yield tar_index_name(shard), self.tar_index_tmp(shard)

    def index_db_path(self) -> str:
        """The local path of the ``index.sqlite`` being built (e.g. to add media metadata)."""
        if not self.sample_index:
            raise ConfigError(
                "media metadata is stored in index.sqlite, which --no-sample-index leaves out.",
                path=self.store.url(INDEX_SQLITE),
                hint="Leave out --no-sample-index, or the --media-metadata-by-* flag.",
            )
        if self._sqlite_tmp is not None:
            return self._sqlite_tmp
        path = self.store.local_path(self.tmp_name(INDEX_SQLITE))
        if path is None:
            raise StokerError("internal: the index of a remote dataset has no local copy.")
        return path

    def __enter__(self) -> PendingPrepare:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.discard()

    def discard(self) -> None:
        """Remove all temporary files (nothing of the dataset changes)."""
        for _, tmp in self._written_tar_indexes():
            self.store.remove(tmp)
        self._tar_indexes_written = 0
        for tmp in self._tmp.values():
            self.store.remove(tmp)
        self._tmp.clear()
        if self._sqlite_tmp is not None and os.path.exists(self._sqlite_tmp):
            os.remove(self._sqlite_tmp)
        if self.abandoned:
            self.work.remove()
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        new_dir = self._new_meta_dir
        if new_dir is not None and os.path.isdir(new_dir) and not os.listdir(new_dir):
            os.rmdir(new_dir)  # made for the temporary files only: leave the dataset as it was

    def publish(
        self,
        *,
        split_ratio: Sequence[tuple[str, float]] | None = None,
        split_parts: Sequence[tuple[str, str]] | None = None,
        shuffle_seed: int | None = None,
        dataset_yaml: dict[str, Any] | None = None,
        dataset_yaml_name: str = DEFAULT_DATASET_YAML,
        split_config_name: str = DEFAULT_SPLIT_CONFIG,
        extra_meta_files: dict[str, bytes] | None = None,
    ) -> PrepareReport:
        """Write the meta files and move everything into place; ``.info.json`` last.

        ``extra_meta_files`` (name -> content) are published into ``.nv-meta`` too, e.g. a
        ``sample_loader.py`` template.
        """
        report = PrepareReport(
            path=self.store.root,
            shards=len(self.shards),
            samples=sum(self.counts.values()),
            bytes=self.bytes,
            seconds=0.0,
            part_names=sorted(self.part_names),
            tar_index_only=self.tar_index_only,
            resumed_shards=self.resumed,
        )
        if not self.tar_index_only:
            if split_parts:
                splits = split_by_patterns(self.shards, split_parts)
            else:
                splits = split_by_ratio(self.shards, split_ratio or [("train", 1.0)], shuffle_seed)
            report.splits = [
                SplitSummary(n, len(s), sum(self.counts[x] for x in s)) for n, s in splits.items()
            ]
            self.store.write_bytes(
                self.tmp_name(f"{META_DIR}/{split_config_name}"),
                SplitConfig(splits).to_yaml().encode(),
            )
            if dataset_yaml is not None:
                self._check_dataset_yaml(dataset_yaml)
                text = yaml.safe_dump(dataset_yaml, sort_keys=False)
                self.store.write_bytes(
                    self.tmp_name(f"{META_DIR}/{dataset_yaml_name}"), text.encode()
                )
                report.dataset_yaml = f"{META_DIR}/{dataset_yaml_name}"
            for name, content in (extra_meta_files or {}).items():
                self.store.write_bytes(self.tmp_name(f"{META_DIR}/{name}"), content)
            info = DatasetInfo({name: self.counts[name] for name in self.shards})
            self.store.write_bytes(self.tmp_name(INFO_JSON), info.to_json().encode())
        if self._sqlite_tmp is not None:  # built locally for a remote store: upload it
            with open(self._sqlite_tmp, "rb") as f:
                self.store.write_bytes(self.tmp_name(INDEX_SQLITE), f.read())
        if not self.sample_index:  # an index of earlier shards would be wrong: remove it
            self.store.remove(INDEX_SQLITE)
        index_uuid = str(uuid.UUID(bytes=self.digest.digest()[:16], version=4))
        self.store.write_bytes(self.tmp_name(INDEX_UUID), index_uuid.encode())
        prints = encode_fingerprints(self.fingerprints, index_uuid)
        self.store.write_bytes(self.tmp_name(FINGERPRINTS), prints)
        for final, tmp in self._written_tar_indexes():
            self.store.publish(tmp, final)
        self._tar_indexes_written = 0
        ordered = sorted(self._tmp, key=lambda final: final == INFO_JSON)
        for final in ordered:
            self.store.publish(self._tmp[final], final)
        self._tmp.clear()
        self.work.remove()
        report.seconds = time.perf_counter() - self._start - self.user_seconds
        return report

    def _check_dataset_yaml(self, raw: dict[str, Any]) -> None:
        config = parse_dataset_config(raw, f"{self.store.url(META_DIR)}/dataset.yaml")
        for alternatives in config.missing_fields(self.part_names).values():
            self.check_parts(alternatives)

    def check_parts(self, alternatives: list[str]) -> None:
        """Raise unless at least one of the alternative parts occurs in the samples."""
        if len(self.part_names) >= MAX_PARTS_REPORTED:
            return  # too many distinct parts to tell what is missing
        if not set(alternatives) & self.part_names:
            raise ConfigError(
                f"the field map names part(s) {', '.join(alternatives)}, which no sample has.",
                path=self.store.url(META_DIR),
                hint=f"Parts found in the shards: {', '.join(sorted(self.part_names))}.",
            )


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
        >>> report = prepare_dataset(  # doctest: +SKIP
        ...     "/data/coco-wds",
        ...     split_ratio="8,1,1",
        ...     dataset_yaml={
        ...         "sample_type": {"__module__": "stoker", "__class__": "CaptioningSample"},
        ...         "field_map": {"image": "jpg", "caption": "txt"},
        ...     },
        ... )
        >>> report.samples  # doctest: +SKIP
        118287
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


def _open_writer(pending: PendingPrepare, tmp_dir: str | None = None) -> SqliteIndexWriter | None:
    if not pending.sample_index:
        return None
    local_db = pending.store.local_path(INDEX_SQLITE)
    if local_db is None:
        if tmp_dir is not None:
            os.makedirs(tmp_dir, exist_ok=True)
        fd, local_db = tempfile.mkstemp(suffix=".sqlite", prefix="stoker-index-", dir=tmp_dir)
        os.close(fd)
        pending._sqlite_tmp = local_db
    else:
        local_db = pending.index_db_path()
    os.makedirs(os.path.dirname(local_db), exist_ok=True)
    return SqliteIndexWriter(local_db)


def _index_into(
    pending: PendingPrepare, num_workers: int | None, progress: bool, tmp_dir: str | None = None
) -> None:
    """Build every chunk file in worker processes (or find it built), then merge them in order."""
    writer = _open_writer(pending, tmp_dir)
    bar = Progress(len(pending.shards), "Indexing shards", enabled=progress)
    bar_open = True
    chunks = plan_chunks(pending.shards)
    builder = ChunkBuilder(pending.work, pending.sample_index, tmp_dir)
    clock = _Clock(pending.timings)
    try:
        for built in clock.timed("wait", ordered_map(builder, chunks, num_workers, len(chunks))):
            with open_chunk(pending.work, built) as path:
                if writer is not None:
                    with clock("rows"):
                        writer.add_chunk(path)
                with clock("shards"):
                    summaries = read_summaries(path)
            with clock("shards"):
                resumed = built.resumed == len(built.chunk.names)
                for shard in summaries:
                    _merge_shard(pending, shard, resumed)
            bar.update(len(summaries), samples=built.samples)
        bar.close()
        bar_open = False
        if writer is not None:
            try:
                with clock("indexes"), index_build_note(sum(pending.counts.values()), progress):
                    writer.close()
            except DuplicateKeyError as e:
                raise _duplicate_error(pending, e) from None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        if bar_open:
            bar.close()
    if pending.tar_index_only:
        _check_counts_unchanged(pending)


@contextlib.contextmanager
def index_build_note(samples: int, progress: bool) -> Iterator[None]:
    """Plain lines around the index sorts, the longest silent step of a large prepare (~30
    minutes at 10^9 samples): when it started, for how many rows, and when it ended."""
    start = time.monotonic()
    if progress:
        print(
            f"Building the indexes of index.sqlite ({samples} samples; sorts on one process, "
            "no progress until done)",
            file=sys.stderr,
            flush=True,
        )
    yield
    if progress:
        took = format_seconds(time.monotonic() - start)
        print(f"Building the indexes of index.sqlite - done in {took}", file=sys.stderr, flush=True)


class _Clock:
    """Adds the seconds of ``with clock(step)`` blocks (and of waits for ``timed`` items) up."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self._step = ""
        self._start = 0.0

    def __call__(self, step: str) -> _Clock:
        self._step = step
        return self

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self._step] += time.perf_counter() - self._start

    def timed(self, step: str, items: Iterator[T]) -> Iterator[T]:
        while True:
            start = time.perf_counter()
            item = next(items, None)
            self.seconds[step] += time.perf_counter() - start
            if item is None:
                return
            yield item


def _merge_shard(pending: PendingPrepare, shard: ShardSummary, chunk_resumed: bool) -> None:
    if pending.shards[pending._tar_indexes_written] != shard.name:
        raise StokerError(f"internal: shard {shard.name!r} merged out of order.")
    pending.store.write_bytes(pending.tar_index_tmp(shard.name), shard.tar_idx)
    pending._tar_indexes_written += 1
    pending.digest.update(shard.digest)
    pending.counts[shard.name] = shard.samples
    pending.fingerprints[shard.name] = shard.fingerprint
    pending.bytes += shard.size
    pending.part_names.update(shard.part_names)
    pending.resumed += chunk_resumed or shard.resumed


def _duplicate_error(pending: PendingPrepare, e: DuplicateKeyError) -> StokerError:
    first, second = pending.shards[e.first_shard_id], pending.shards[e.second_shard_id]
    where = f"shard {first!r} and shard {second!r}" if first != second else f"shard {first!r}"
    return FormatError(
        f"duplicate sample key: it occurs in {where}; sample keys must be unique in a dataset.",
        path=pending.store.url(second),
        key=e.key,
        hint="Run `stoker prepare` with --fix-duplicates (renames each shard's members to "
        "<shard>/<name> in place), re-shard the data with `stoker pack`, which makes keys "
        "unique, or put each shard's files in a folder named after the shard.",
    )


def _check_counts_unchanged(pending: PendingPrepare) -> None:
    info = read_info(pending.store)
    for name, count in pending.counts.items():
        if info.shard_counts.get(name) != count:
            raise FormatError(
                f"the shard now has {count} samples but .info.json says "
                f"{info.shard_counts.get(name)}.",
                path=pending.store.url(name),
                hint="The shards changed since the dataset was prepared; run a full "
                "`stoker prepare --force-overwrite`.",
            )
