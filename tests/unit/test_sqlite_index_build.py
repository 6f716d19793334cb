"""``SqliteIndexWriter``: indexes built once at the end give Energon's schema, an enforced
UNIQUE key, the same bytes for the same rows, and duplicate keys with both shards named."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stoker.format.sqlite_index import (
    INDEXES_DDL,
    PARTS_DDL,
    SAMPLES_DDL,
    DuplicateKeyError,
    SqliteIndexReader,
    SqliteIndexWriter,
)


def _write(path: Path, shards: list[list[str]]) -> None:
    writer = SqliteIndexWriter(str(path))
    try:
        for shard_id, keys in enumerate(shards):
            offsets = [i * 1024 for i in range(len(keys) + 1)]
            parts = [(i, "txt", i * 1024 + 512, 3) for i in range(len(keys))]
            writer.add_shard(shard_id, keys, offsets, parts)
        writer.close()
    except BaseException:
        writer.abort()
        raise


def _schema(path: Path) -> set[tuple[str, str, str, str | None]]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    db.close()
    return {(str(a), str(b), str(c), d) for a, b, c, d in rows}


def test_schema_is_energons_and_the_key_is_unique(tmp_path: Path) -> None:
    built = tmp_path / "built.sqlite"
    _write(built, [["k3", "k1"], ["k2"]])
    reference = tmp_path / "reference.sqlite"  # Energon's DDL, executed as is
    db = sqlite3.connect(reference)
    for ddl in (SAMPLES_DDL, PARTS_DDL, *INDEXES_DDL):
        db.execute(ddl)
    db.close()
    assert _schema(built) == _schema(reference)

    db = sqlite3.connect(built)
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    plan = db.execute("EXPLAIN QUERY PLAN SELECT * FROM samples WHERE sample_key = 'k1'")
    assert "sqlite_autoindex_samples_1" in str(plan.fetchall())
    rows = db.execute("SELECT tar_file_id, sample_key, sample_index FROM samples ORDER BY rowid")
    assert rows.fetchall() == [(0, "k3", 0), (0, "k1", 1), (1, "k2", 0)]  # shard order
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        db.execute("INSERT INTO samples VALUES (2, 'k2', 0, 0, 0)")
    db.close()
    reader = SqliteIndexReader(str(built))
    location = reader.locate("k1")
    assert location is not None and (location.shard_id, location.index) == (0, 1)
    assert reader.parts(1, 0) == [("txt", 512, 3)]
    reader.close()


def test_same_rows_give_the_same_bytes(tmp_path: Path) -> None:
    shards = [[f"{(i * 7919) % 1000:04d}-{s}" for i in range(300)] for s in range(4)]
    _write(tmp_path / "a.sqlite", shards)
    _write(tmp_path / "b.sqlite", shards)
    assert (tmp_path / "a.sqlite").read_bytes() == (tmp_path / "b.sqlite").read_bytes()


@pytest.mark.parametrize(
    ("shards", "expected"),
    [([["a", "b"], ["c"], ["d", "b"]], ("b", 0, 2)), ([["a"], ["x", "y", "x"]], ("x", 1, 1))],
)
def test_duplicate_keys_name_both_shards(
    tmp_path: Path, shards: list[list[str]], expected: tuple[str, int, int]
) -> None:
    with pytest.raises(DuplicateKeyError) as info:
        _write(tmp_path / "dup.sqlite", shards)
    assert (info.value.key, info.value.first_shard_id, info.value.second_shard_id) == expected
