"""The merge of ``prepare`` in pieces: chunks of consecutive shards, built in parallel.

The shards are cut into chunks of consecutive shards (:func:`plan_chunks`: a function of the
shard count alone, so the bytes of the result never depend on how many processes or ranks
worked). A worker process (or a rank of a distributed prepare) turns each chunk into one small
SQLite file in the work folder: the chunk's ``samples`` and ``sample_parts`` rows in shard order,
without indexes, and a ``stoker_shards`` table with one row per shard holding what the merge
needs (sample count, size, fingerprint, part names, the ``.tar.idx`` bytes and a digest). The
merge then appends each chunk's rows with one ``INSERT ... SELECT`` per table (SQLite copies the
records; no Python per row) and builds the indexes once.

A chunk file is named by a hash of its shards with their sizes and modification times: a re-run
uses the chunk files it finds still valid and reads or loads only the shards of the others.

Example:
    >>> [c.names for c in plan_chunks(["a.tar", "b.tar", "c.tar"])]
    [('a.tar',), ('b.tar',), ('c.tar',)]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from stoker.errors import StokerError
from stoker.format.prepare_work import TMP_MARK, WORK_DIR, PrepareWork
from stoker.format.shard_scan import ShardIndex
from stoker.format.sqlite_index import CHUNK_PRAGMAS, create_row_tables, insert_shard_rows
from stoker.format.tar_index import encode_offsets

#: At most this many chunks (beyond it, chunks grow): enough to keep 1000 processes busy, few
#: enough that opening each chunk costs the merge little.
MAX_CHUNKS = 1024
#: Bumped whenever a chunk file's layout changes: older chunk files are then not used.
CHUNK_VERSION = 1
_SHARDS_DDL = (
    "CREATE TABLE stoker_shards (shard_id INTEGER, name TEXT, samples INTEGER, size INTEGER, "
    "fingerprint TEXT, part_names TEXT, resumed INTEGER, digest BLOB, tar_idx BLOB)"
)


@dataclass(frozen=True)
class Chunk:
    """Consecutive shards: ``names``, the first at position ``first_shard_id``."""

    index: int
    first_shard_id: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class ShardSummary:
    """One shard's row of a chunk file: what the merge writes besides the index rows."""

    shard_id: int
    name: str
    samples: int
    size: int
    fingerprint: str
    part_names: list[str]
    resumed: bool
    digest: bytes
    tar_idx: bytes


@dataclass(frozen=True)
class BuiltChunk:
    """A chunk file in the work folder (``name``, relative to the dataset root)."""

    chunk: Chunk
    name: str
    samples: int
    #: Shards loaded from the work folder (or the whole chunk file was) rather than read.
    resumed: int
    #: A local temporary copy, where the store is remote (built or downloaded there); whoever
    #: receives the chunk removes it (:func:`open_chunk`).
    local: str | None = None


def plan_chunks(shards: Sequence[str]) -> list[Chunk]:
    """Cut ``shards`` into at most :data:`MAX_CHUNKS` runs of consecutive shards."""
    size = max(1, math.ceil(len(shards) / MAX_CHUNKS))
    return [
        Chunk(i, start, tuple(shards[start : start + size]))
        for i, start in enumerate(range(0, len(shards), size))
    ]


def shard_digest(name: str, keys: Sequence[str], tar_idx: bytes) -> bytes:
    """What ``index.uuid`` is derived from, per shard: its name, keys and offsets."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape") + b"\0")
    digest.update("\0".join(keys).encode("utf-8", "surrogateescape") + b"\0")
    digest.update(tar_idx)
    return digest.digest()


@dataclass(frozen=True)
class ChunkBuilder:
    """Builds (or finds still valid) the chunk file of a :class:`Chunk`; picklable, so it runs
    in worker processes. ``sample_index=False`` leaves the row tables empty; ``tmp_dir``: where
    local copies of a remote store's chunk files go (default: the system's temporary folder)."""

    work: PrepareWork
    sample_index: bool = True
    tmp_dir: str | None = None

    def __call__(self, chunk: Chunk) -> BuiltChunk:
        store = self.work.store
        prints = [self.work.fingerprint(name) for name in chunk.names]
        name = self.chunk_name(chunk, prints)
        if store.exists(name):
            local = store.local_path(name)
            path = local if local is not None else self._download(name)
            samples = _valid_samples(path)
            if samples is not None:
                copy = None if local is not None else path
                return BuiltChunk(chunk, name, samples, len(chunk.names), copy)
            if local is None:
                os.remove(path)
        return self._build(chunk, name)

    def _temp(self) -> str:
        if self.tmp_dir is not None:
            os.makedirs(self.tmp_dir, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="stoker-chunk-", suffix=".sqlite", dir=self.tmp_dir)
        os.close(fd)
        return path

    def _download(self, name: str) -> str:
        path = self._temp()
        with open(path, "wb") as f:
            f.write(self.work.store.read_bytes(name))
        return path

    def chunk_name(self, chunk: Chunk, prints: list[dict[str, object]]) -> str:
        seed = [CHUNK_VERSION, self.sample_index, chunk.first_shard_id, list(chunk.names), prints]
        digest = hashlib.sha256(json.dumps(seed, sort_keys=True).encode()).hexdigest()[:32]
        return f"{WORK_DIR}/chunks/{digest}.sqlite"

    def _build(self, chunk: Chunk, name: str) -> BuiltChunk:
        store = self.work.store
        tmp = f"{name}{TMP_MARK}{uuid.uuid4().hex[:12]}"
        local = store.local_path(tmp)
        if local is not None:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            path = local
        else:
            path = self._temp()
            os.remove(path)  # sqlite makes it
        samples = resumed = 0
        published = False
        try:
            db = sqlite3.connect(path, isolation_level=None)
            try:
                for pragma in CHUNK_PRAGMAS:
                    db.execute(f"PRAGMA {pragma}")
                db.execute("BEGIN")
                create_row_tables(db)
                db.execute(_SHARDS_DDL)
                for shard_id, shard_name in enumerate(chunk.names, chunk.first_shard_id):
                    shard = self.work.scan(shard_name)
                    self._add(db, shard_id, shard)
                    samples += len(shard.keys)
                    resumed += shard.resumed
                db.execute("COMMIT")
            finally:
                db.close()
            if local is None:
                with open(path, "rb") as f:
                    store.write_bytes(tmp, f.read())
            store.publish(tmp, name)
            published = True
        finally:
            if not published and os.path.exists(path):
                os.remove(path)
        return BuiltChunk(chunk, name, samples, resumed, None if local is not None else path)

    def _add(self, db: sqlite3.Connection, shard_id: int, shard: ShardIndex) -> None:
        if self.sample_index:
            insert_shard_rows(db, shard_id, shard.keys, shard.offsets, shard.parts)
        tar_idx = encode_offsets(shard.offsets)
        db.execute(
            "INSERT INTO stoker_shards VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                shard_id,
                shard.name,
                len(shard.keys),
                shard.size,
                shard.fingerprint,
                json.dumps(sorted(shard.part_names)),
                int(shard.resumed),
                shard_digest(shard.name, shard.keys, tar_idx),
                tar_idx,
            ),
        )


def _valid_samples(path: str) -> int | None:
    """The sample count of a complete chunk file, or None if it cannot be read."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            (samples,) = db.execute("SELECT SUM(samples) FROM stoker_shards").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return None if samples is None else int(samples)


def read_summaries(path: str) -> list[ShardSummary]:
    """The ``stoker_shards`` rows of a chunk file, in shard order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT * FROM stoker_shards ORDER BY shard_id").fetchall()
    finally:
        db.close()
    return [
        ShardSummary(
            int(shard_id),
            str(name),
            int(samples),
            int(size),
            str(fingerprint),
            list(json.loads(parts)),
            bool(resumed),
            bytes(digest),
            bytes(tar_idx),
        )
        for shard_id, name, samples, size, fingerprint, parts, resumed, digest, tar_idx in rows
    ]


@contextlib.contextmanager
def open_chunk(work: PrepareWork, built: BuiltChunk) -> Iterator[str]:
    """``with open_chunk(work, built) as path``: a local path of the chunk file, its temporary
    copy (removed at the end) where the store is remote."""
    try:
        path = built.local or work.store.local_path(built.name)
        if path is None or not os.path.exists(path):
            raise StokerError(
                f"the chunk file {built.name} is gone.",
                path=work.store.url(built.name),
                hint="Is another prepare of the same dataset running? Run it again.",
            )
        yield path
    finally:
        discard_copy(built)


def discard_copy(built: BuiltChunk) -> None:
    """Remove the local temporary copy of a chunk file, if it has one."""
    if built.local is not None and os.path.exists(built.local):
        os.remove(built.local)
