"""``PendingPrepare``: the index files of a prepare, written under temporary names until
:meth:`~PendingPrepare.publish` moves them into place (``.info.json`` last), or removed.

Also :class:`PrepareReport`, what a prepare did, for the CLI to print.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import yaml

from stoker.errors import ConfigError, FormatError, StokerError
from stoker.format.dataset_config import parse_dataset_config
from stoker.format.fingerprints import FINGERPRINTS, encode_fingerprints
from stoker.format.index_chunks import ShardSummary
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    DEFAULT_SPLIT_CONFIG,
    INDEX_SQLITE,
    INDEX_UUID,
    INFO_JSON,
    META_DIR,
    DatasetInfo,
    SplitConfig,
    read_info,
)
from stoker.format.prepare_lock import PrepareLock
from stoker.format.prepare_work import TMP_MARK as TMP_MARK
from stoker.format.prepare_work import PrepareWork
from stoker.format.shard_scan import MAX_PARTS_REPORTED
from stoker.format.splits import split_by_patterns, split_by_ratio
from stoker.format.sqlite_index import DuplicateKeyError, SqliteIndexWriter
from stoker.format.tar_index import tar_index_name
from stoker.storage import Store


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

    def open_index_writer(self, tmp_dir: str | None = None) -> SqliteIndexWriter | None:
        """The writer of ``index.sqlite`` (None under ``--no-sample-index``); for a remote store
        it writes a local file in ``tmp_dir``, uploaded by :meth:`publish`."""
        if not self.sample_index:
            return None
        local_db = self.store.local_path(INDEX_SQLITE)
        if local_db is None:
            if tmp_dir is not None:
                os.makedirs(tmp_dir, exist_ok=True)
            fd, local_db = tempfile.mkstemp(suffix=".sqlite", prefix="stoker-index-", dir=tmp_dir)
            os.close(fd)
            self._sqlite_tmp = local_db
        else:
            local_db = self.index_db_path()
        os.makedirs(os.path.dirname(local_db), exist_ok=True)
        return SqliteIndexWriter(local_db)

    def add_shard(self, shard: ShardSummary, chunk_resumed: bool) -> None:
        """Take the next shard's index (in order): its ``.tar.idx`` under a temporary name, its
        counts, parts and fingerprint."""
        if self.shards[self._tar_indexes_written] != shard.name:
            raise StokerError(f"internal: shard {shard.name!r} merged out of order.")
        self.store.write_bytes(self.tar_index_tmp(shard.name), shard.tar_idx)
        self._tar_indexes_written += 1
        self.digest.update(shard.digest)
        self.counts[shard.name] = shard.samples
        self.fingerprints[shard.name] = shard.fingerprint
        self.bytes += shard.size
        self.part_names.update(shard.part_names)
        self.resumed += chunk_resumed or shard.resumed

    def duplicate_error(self, e: DuplicateKeyError) -> StokerError:
        """The error of a sample key found twice while ``index.sqlite`` was built."""
        first, second = self.shards[e.first_shard_id], self.shards[e.second_shard_id]
        where = f"shard {first!r} and shard {second!r}" if first != second else f"shard {first!r}"
        return FormatError(
            f"duplicate sample key: it occurs in {where}; sample keys must be unique in a dataset.",
            path=self.store.url(second),
            key=e.key,
            hint="Run `stoker prepare` with --fix-duplicates (renames each shard's members to "
            "<shard>/<name> in place), re-shard the data with `stoker pack`, which makes keys "
            "unique, or put each shard's files in a folder named after the shard.",
        )

    def check_counts_unchanged(self) -> None:
        """Under ``--tar-index-only``: raise if a shard's sample count differs from .info.json's."""
        info = read_info(self.store)
        for name, count in self.counts.items():
            if info.shard_counts.get(name) != count:
                raise FormatError(
                    f"the shard now has {count} samples but .info.json says "
                    f"{info.shard_counts.get(name)}.",
                    path=self.store.url(name),
                    hint="The shards changed since the dataset was prepared; run a full "
                    "`stoker prepare --force-overwrite`.",
                )
