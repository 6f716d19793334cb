"""ParquetReader: rows through their row groups, turned into values a chunk at a time, a byte
budget on the tables and chunks kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.errors import FormatError
from stoker.pipeline.parquet_read import CHUNK_ROWS, ParquetReader
from stoker.storage import open_store

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _file(root: Path) -> Path:
    table = pa.table({"text": [f"row {i}" * 50 for i in range(100)], "n": list(range(100))})
    pq.write_table(table, root / "a.parquet", row_group_size=10)
    return root


def test_rows_come_from_their_row_group(tmp_path: Path) -> None:
    reader = ParquetReader(open_store(str(_file(tmp_path))), ["a.parquet"])
    for index in (0, 9, 10, 55, 99, 3):
        raw = reader.read(0, index)
        assert raw.parts["n"] == index and raw.key == f"a.parquet/{index}"
    assert reader.groups_read == 4  # groups 0, 1, 5 and 9; group 0 again from the cache
    offsets = [reader.read(0, index).offset for index in (0, 9, 10)]
    assert 4 <= offsets[0] == offsets[1] < offsets[2]  # where the row's group begins, in bytes
    with pytest.raises(FormatError, match="row 100 is outside the file's 100 rows"):
        reader.read(0, 100)
    reader.close()


def test_decoded_groups_are_kept_within_the_budget(tmp_path: Path) -> None:
    store = open_store(str(_file(tmp_path)))
    group_bytes = pq.ParquetFile(tmp_path / "a.parquet").read_row_group(0).nbytes
    small = ParquetReader(store, ["a.parquet"], budget=int(group_bytes * 1.5))
    for index in (0, 10, 0):  # group 1 pushes group 0 out: read again
        small.read(0, index)
    assert small.groups_read == 3
    assert small._weight <= group_bytes * 1.5
    large = ParquetReader(store, ["a.parquet"], budget=group_bytes * 4)
    for index in (0, 10, 0):
        large.read(0, index)
    assert large.groups_read == 2


def test_a_read_turns_its_rows_chunk_into_values_not_its_whole_group(tmp_path: Path) -> None:
    table = pa.table({"n": list(range(2000))})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1000)
    reader = ParquetReader(open_store(str(tmp_path)), ["a.parquet"])
    for index in (0, 1000, CHUNK_ROWS - 1, 1999, 1000 + CHUNK_ROWS):
        assert reader.read(0, index).parts["n"] == index
    chunks = {key[2]: value[0] for key, value in reader._cache.items() if key[0] == "chunk"}
    assert reader.groups_read == 2
    sizes = {chunk: len(columns["n"]) for chunk, (columns, _, _) in chunks.items()}
    per_group = -(-1000 // CHUNK_ROWS)  # a group's chunks, its last one shorter
    short = 1000 - (per_group - 1) * CHUNK_ROWS
    assert sizes == {
        0: CHUNK_ROWS, per_group: CHUNK_ROWS, 2 * per_group - 1: short, per_group + 1: CHUNK_ROWS
    }  # fmt: skip
    run = reader.column_run([0] * 4, [999, 1000, 5, 1500])
    assert run is not None and run.fields["n"] == [999, 1000, 5, 1500]
    assert run.starts[0] < run.starts[1] == run.starts[3]  # the byte offsets of their groups
    assert ("table", 0, 0) in reader._cache
    assert [reader.read(0, i).parts["n"] for i in range(1000)] == list(range(1000))
    assert ("table", 0, 0) not in reader._cache  # all its rows are values: the table let go
    assert ("table", 0, 1) in reader._cache and reader.groups_read == 2


def test_a_chunk_is_let_go_once_all_its_rows_were_read(tmp_path: Path) -> None:
    pq.write_table(pa.table({"n": list(range(1000))}), tmp_path / "a.parquet")
    reader = ParquetReader(open_store(str(tmp_path)), ["a.parquet"])
    assert [reader.read(0, i).parts["n"] for i in range(CHUNK_ROWS - 1)] == list(range(255))
    assert ("chunk", 0, 0) in reader._cache
    run = reader.column_run([0, 0, 0], [CHUNK_ROWS - 1, CHUNK_ROWS, CHUNK_ROWS + 1])
    assert run is not None and run.fields["n"] == [255, 256, 257]
    assert ("chunk", 0, 0) not in reader._cache and ("chunk", 0, 1) in reader._cache
    assert reader._weight == sum(weight for _, weight in reader._cache.values())
