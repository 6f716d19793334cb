"""The index merged from chunk files: chunks of consecutive shards, every row once and in shard
order, the same bytes however many processes built the chunks, and chunks kept for a re-run."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stoker.format import index_chunks
from stoker.format.index_chunks import plan_chunks
from stoker.format.prepare import prepare_dataset
from stoker.format.sqlite_index import SqliteIndexReader
from tests.conftest import make_dataset, snapshot


def test_plan_cuts_consecutive_runs_and_caps_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"s{i}.tar" for i in range(10)]
    assert [c.names for c in plan_chunks(names)] == [(n,) for n in names]
    monkeypatch.setattr(index_chunks, "MAX_CHUNKS", 4)
    chunks = plan_chunks(names)
    assert [len(c.names) for c in chunks] == [3, 3, 3, 1]
    assert [c.first_shard_id for c in chunks] == [0, 3, 6, 9]
    assert [n for c in chunks for n in c.names] == names


def _rows(db: Path) -> list[tuple[int, int, str, int]]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT rowid, tar_file_id, sample_key, sample_index FROM samples ORDER BY rowid"
        ).fetchall()
    finally:
        con.close()
    return [(int(a), int(b), str(c), int(d)) for a, b, c, d in rows]


@pytest.mark.parametrize("max_chunks", [2, 1024])
def test_chunks_of_several_shards_give_every_row_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_chunks: int
) -> None:
    monkeypatch.setattr(index_chunks, "MAX_CHUNKS", max_chunks)
    root = make_dataset(tmp_path / "ds", shards=5, per_shard=3)
    prepare_dataset(str(root), split_ratio="1,0,0", num_workers=2)
    db = root / ".nv-meta/index.sqlite"
    rows = _rows(db)
    assert [r[0] for r in rows] == list(range(1, 16))  # rowids follow shard order, no gaps
    assert [(r[1], r[3]) for r in rows] == [(s, i) for s in range(5) for i in range(3)]
    reader = SqliteIndexReader(str(db))
    location = reader.locate(rows[7][2])
    assert location is not None and (location.shard_id, location.index) == (2, 1)
    assert reader.count() == 15 and len(reader.parts(4, 2)) == 2
    reader.close()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()


def test_bytes_do_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    make_dataset(one, shards=4, per_shard=5)
    make_dataset(two, shards=4, per_shard=5)
    prepare_dataset(str(one), split_ratio="1,0,0", num_workers=1)
    prepare_dataset(str(two), split_ratio="1,0,0", num_workers=3)
    assert snapshot(one) == snapshot(two)


def test_a_rerun_uses_the_chunks_still_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_chunks, "MAX_CHUNKS", 2)
    root = make_dataset(tmp_path / "ds", shards=4, per_shard=3)
    store_work = root / ".nv-meta/.stoker-work/chunks"
    built: list[str] = []
    real = index_chunks.ChunkBuilder._build

    def counting(self: index_chunks.ChunkBuilder, chunk: index_chunks.Chunk, name: str) -> object:
        built.append(name)
        return real(self, chunk, name)

    monkeypatch.setattr(index_chunks.ChunkBuilder, "_build", counting)

    def fail(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("stoker.format.prepare.PendingPrepare.publish", fail)
    with pytest.raises(KeyboardInterrupt):
        prepare_dataset(str(root), split_ratio="1,0,0", num_workers=1)
    assert len(built) == 2 and len(list(store_work.iterdir())) == 2
    monkeypatch.undo()
    monkeypatch.setattr(index_chunks, "MAX_CHUNKS", 2)
    monkeypatch.setattr(index_chunks.ChunkBuilder, "_build", counting)
    built.clear()
    report = prepare_dataset(str(root), split_ratio="1,0,0", num_workers=1)
    assert built == [] and report.resumed_shards == 4  # both chunks taken as they were
    assert not (root / ".nv-meta/.stoker-work").exists()
