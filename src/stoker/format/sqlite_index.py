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


#: The table as first created: no UNIQUE constraint, so rows append without touching a key
#: index; :meth:`SqliteIndexWriter.close` builds that index once and then records the schema as
#: :data:`SAMPLES_DDL` (Energon's), with the index as its automatic UNIQUE index.
_KEY_COLUMN = "sample_key TEXT NOT NULL"
_SAMPLES_BULK_DDL = SAMPLES_DDL.replace(f"{_KEY_COLUMN} UNIQUE,", f"{_KEY_COLUMN},")
_KEY_INDEX = "stoker_samples_key_build"
_AUTOINDEX = "sqlite_autoindex_samples_1"
#: Pragmas of the build: no journal (the file is temporary until published), no fsync, a 128 MiB
#: page cache (bounds the index sorts' memory too: each sort thread keeps at most that much in
#: memory and spills the rest to temporary files), and up to 4 helper threads for those sorts.
#: None of them changes the bytes of the file.
BUILD_PRAGMAS = (
    "journal_mode=OFF",
    "synchronous=OFF",
    "locking_mode=EXCLUSIVE",
    "cache_size=-131072",
    "threads=4",
)
#: Pragmas of a chunk file (:mod:`stoker.format.index_chunks`): rows only, written once.
CHUNK_PRAGMAS = ("journal_mode=OFF", "synchronous=OFF", "cache_size=-16384")


class DuplicateKeyError(Exception):
    """A sample key occurs twice: ``key``, and the positions of the shards with its first two
    rows (the same position when one shard has it twice)."""

    def __init__(self, key: str, first_shard_id: int, second_shard_id: int) -> None:
        super().__init__(key)
        self.key = key
        self.first_shard_id = first_shard_id
        self.second_shard_id = second_shard_id


def create_row_tables(db: sqlite3.Connection) -> None:
    """The two tables of the index as the build fills them: no indexes, no UNIQUE key."""
    db.execute(_SAMPLES_BULK_DDL)
    db.execute(PARTS_DDL)


def insert_shard_rows(
    db: sqlite3.Connection,
    shard_id: int,
    keys: Sequence[str],
    offsets: Sequence[int],
    parts: Iterable[tuple[int, str, int, int]],
) -> None:
    """Append one shard's rows: sample keys, N+1 sample offsets and (sample, part, offset,
    size) rows."""
    rows = zip(
        [shard_id] * len(keys),
        keys,
        range(len(keys)),
        offsets[:-1],
        [b - a for a, b in itertools.pairwise(offsets)],
        strict=True,
    )
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?)", rows)
    db.executemany(
        "INSERT INTO sample_parts VALUES (?, ?, ?, ?, ?)", ((shard_id, *row) for row in parts)
    )


class SqliteIndexWriter:
    """Writes a new index file in bulk.

    Rows are appended in shard order to tables without indexes, either shard by shard
    (:meth:`add_shard`) or a whole chunk file at a time (:meth:`add_chunk`: SQLite copies the
    rows, no Python per row); :meth:`close` then builds the
    key index and the secondary indexes once each (sorted builds, bounded memory), which scales
    to 10^9 rows where inserting into a key index row by row does not (random keys touch a
    random page of an index far larger than memory for every row). The result is the same
    schema, rows and row order as inserting into Energon's tables, and the same bytes for the
    same ``add_shard`` calls.

    Example:
        >>> import sqlite3
        >>> writer = SqliteIndexWriter("index.sqlite")
        >>> writer.add_shard(0, ["a", "b"], [0, 1024, 2048], [(0, "txt", 512, 3)])
        >>> writer.close()
        >>> sqlite3.connect("index.sqlite").execute("SELECT sample_key FROM samples").fetchall()
        [('a',), ('b',)]
    """

    def __init__(self, local_path: str) -> None:
        self._db = sqlite3.connect(local_path, isolation_level=None)
        for pragma in BUILD_PRAGMAS:
            self._db.execute(f"PRAGMA {pragma}")
        self._db.execute("BEGIN")
        create_row_tables(self._db)

    def _begin(self) -> None:
        if not self._db.in_transaction:
            self._db.execute("BEGIN")

    def add_chunk(self, chunk_path: str) -> None:
        """Append every row of a chunk file (made with :func:`create_row_tables` and
        :func:`insert_shard_rows`), in its order, after the rows added so far."""
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self._db.execute("ATTACH DATABASE ? AS chunk", (chunk_path,))
        try:
            self._db.execute("BEGIN")
            # the same columns and constraints: SQLite copies the records as they are
            self._db.execute("INSERT INTO main.samples SELECT * FROM chunk.samples")
            self._db.execute("INSERT INTO main.sample_parts SELECT * FROM chunk.sample_parts")
            self._db.execute("COMMIT")
        finally:
            self._db.execute("DETACH DATABASE chunk")

    def add_shard(
        self,
        shard_id: int,
        keys: Sequence[str],
        offsets: Sequence[int],
        parts: Iterable[tuple[int, str, int, int]],
    ) -> None:
        """Add one shard: sample keys, N+1 sample offsets and (sample, part, offset, size) rows."""
        self._begin()
        insert_shard_rows(self._db, shard_id, keys, offsets, parts)

    def close(self) -> None:
        """Build the key index (raising :class:`DuplicateKeyError` if a key occurs twice) and
        the secondary indexes, and commit."""
        self._begin()
        try:
            self._db.execute(f"CREATE UNIQUE INDEX {_KEY_INDEX} ON samples(sample_key)")
        except sqlite3.IntegrityError:
            raise self._duplicate() from None
        for ddl in INDEXES_DDL:
            self._db.execute(ddl)
        self._db.execute("COMMIT")
        self._adopt_key_index()
        self._db.close()

    def _adopt_key_index(self) -> None:
        """Record the table as Energon's DDL (``sample_key ... UNIQUE``) and the index built in
        :meth:`close` as its automatic index: what SQLite would have made, built in one sort.
        The index holds the same entries (key, rowid) in the same order either way."""
        (sql,) = self._db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'samples'"
        ).fetchone()
        unique = str(sql).replace(f"{_KEY_COLUMN},", f"{_KEY_COLUMN} UNIQUE,", 1)
        self._db.execute("PRAGMA writable_schema=ON")
        self._db.execute("BEGIN")
        self._db.execute(
            "UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = 'samples'", (unique,)
        )
        self._db.execute(
            "UPDATE sqlite_master SET name = ?, sql = NULL WHERE name = ?",
            (_AUTOINDEX, _KEY_INDEX),
        )
        (version,) = self._db.execute("PRAGMA schema_version").fetchone()
        self._db.execute(f"PRAGMA schema_version={int(version) + 1}")
        self._db.execute("COMMIT")
        self._db.execute("PRAGMA writable_schema=OFF")

    def _duplicate(self) -> DuplicateKeyError:
        """The first duplicate key in shard order, and where its first two rows are."""
        (key,) = self._db.execute(
            "SELECT sample_key FROM samples WHERE sample_key IN (SELECT sample_key FROM samples "
            "GROUP BY sample_key HAVING COUNT(*) > 1) ORDER BY rowid LIMIT 1"
        ).fetchone()
        first, second = (
            int(row[0])
            for row in self._db.execute(
                "SELECT tar_file_id FROM samples WHERE sample_key = ? ORDER BY rowid LIMIT 2",
                (key,),
            )
        )
        self.abort()
        return DuplicateKeyError(str(key), first, second)

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
