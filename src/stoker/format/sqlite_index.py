"""``.nv-meta/index.sqlite``: every sample's key and byte range, and every part's data range.

The schema is Energon's, so either library reads what the other wrote::

    samples(tar_file_id, sample_key UNIQUE, sample_index, byte_offset, byte_size)
    sample_parts(tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size)

``tar_file_id`` is the shard's position in ``.info.json``.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

SAMPLES_DDL = """
CREATE TABLE IF NOT EXISTS samples (
    tar_file_id INTEGER NOT NULL,
    sample_key TEXT NOT NULL UNIQUE,
    sample_index INTEGER NOT NULL,
    byte_offset INTEGER,
    byte_size INTEGER
)"""
PARTS_DDL = """
CREATE TABLE IF NOT EXISTS sample_parts (
    tar_file_id INTEGER,
    sample_index INTEGER,
    part_name TEXT,
    content_byte_offset INTEGER,
    content_byte_size INTEGER
)"""
INDEXES_DDL = (
    "CREATE INDEX IF NOT EXISTS idx_samples_by_tar_and_idx ON samples(tar_file_id, sample_index)",
    "CREATE INDEX IF NOT EXISTS idx_sample_parts_seq "
    "ON sample_parts(tar_file_id, sample_index, content_byte_offset)",
    "CREATE INDEX IF NOT EXISTS idx_sample_parts_full ON sample_parts(tar_file_id, sample_index, "
    "part_name, content_byte_offset, content_byte_size)",
)


class DuplicateKeyError(Exception):
    """A sample key was inserted twice; ``key`` names it."""

    def __init__(self, key: str, first_shard_id: int | None) -> None:
        super().__init__(key)
        self.key = key
        self.first_shard_id = first_shard_id


class SqliteIndexWriter:
    """Writes a new index file in bulk (no journal: the file is temporary until published)."""

    def __init__(self, local_path: str) -> None:
        self._db = sqlite3.connect(local_path, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-65536"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("BEGIN")
        self._db.execute(SAMPLES_DDL)
        self._db.execute(PARTS_DDL)

    def add_shard(
        self,
        shard_id: int,
        keys: Sequence[str],
        offsets: Sequence[int],
        parts: Iterable[tuple[int, str, int, int]],
    ) -> None:
        """Add one shard: sample keys, N+1 sample offsets and (sample, part, offset, size) rows."""
        rows = zip(
            [shard_id] * len(keys),
            keys,
            range(len(keys)),
            offsets[:-1],
            [b - a for a, b in itertools.pairwise(offsets)],
            strict=True,
        )
        self._db.execute("SAVEPOINT shard")
        try:
            self._db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            self._db.execute("ROLLBACK TO SAVEPOINT shard")
            raise self._duplicate(keys) from None
        self._db.execute("RELEASE SAVEPOINT shard")
        self._db.executemany(
            "INSERT INTO sample_parts VALUES (?, ?, ?, ?, ?)",
            ((shard_id, *row) for row in parts),
        )

    def _duplicate(self, keys: Sequence[str]) -> DuplicateKeyError:
        seen: set[str] = set()
        for key in keys:
            row = self._db.execute(
                "SELECT tar_file_id FROM samples WHERE sample_key = ?", (key,)
            ).fetchone()
            if row is not None:
                return DuplicateKeyError(key, int(row[0]))
            if key in seen:
                return DuplicateKeyError(key, None)
            seen.add(key)
        return DuplicateKeyError(keys[0] if keys else "", None)

    def close(self) -> None:
        """Build the secondary indexes and commit."""
        for ddl in INDEXES_DDL:
            self._db.execute(ddl)
        self._db.execute("COMMIT")
        self._db.close()

    def abort(self) -> None:
        self._db.close()


@dataclass(frozen=True)
class SampleLocation:
    shard_id: int
    index: int
    byte_offset: int
    byte_size: int


class SqliteIndexReader:
    """Read-only lookups in an index file (opened immutable, safe in many processes, and in
    many threads: a cache pool's threads read through the worker's stores)."""

    def __init__(self, local_path: str) -> None:
        self._db = sqlite3.connect(
            f"file:{local_path}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        self._lock = threading.Lock()

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])

    def locate(self, key: str) -> SampleLocation | None:
        """Where the sample ``key`` is, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT tar_file_id, sample_index, byte_offset, byte_size FROM samples "
                "WHERE sample_key = ?",
                (key,),
            ).fetchone()
        return None if row is None else SampleLocation(*map(int, row))

    def parts(self, shard_id: int, index: int) -> list[tuple[str, int, int]]:
        """(part name, data offset, data size) of one sample, in tar order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT part_name, content_byte_offset, content_byte_size FROM sample_parts "
                "WHERE tar_file_id = ? AND sample_index = ? ORDER BY content_byte_offset",
                (shard_id, index),
            ).fetchall()
        return [(str(name), int(offset), int(size)) for name, offset, size in rows]

    def iter_parts(self) -> Iterator[tuple[str, str, int, int, int]]:
        """(sample key, part name, shard id, data offset, data size) of every part, in shard
        and tar order."""
        rows = self._db.execute(
            "SELECT s.sample_key, p.part_name, p.tar_file_id, p.content_byte_offset, "
            "p.content_byte_size FROM samples s JOIN sample_parts p ON "
            "p.tar_file_id = s.tar_file_id AND p.sample_index = s.sample_index "
            "ORDER BY p.tar_file_id, p.sample_index, p.content_byte_offset"
        )
        for key, part, shard, offset, size in rows:
            yield str(key), str(part), int(shard), int(offset), int(size)

    def duplicate_keys(self, limit: int = 10) -> list[str]:
        return [
            str(row[0])
            for row in self._db.execute(
                "SELECT sample_key FROM samples GROUP BY sample_key HAVING COUNT(*) > 1 LIMIT ?",
                (limit,),
            )
        ]

    def shard_counts(self) -> dict[int, int]:
        return {
            int(shard): int(n)
            for shard, n in self._db.execute(
                "SELECT tar_file_id, COUNT(*) FROM samples GROUP BY tar_file_id"
            )
        }

    def close(self) -> None:
        self._db.close()
