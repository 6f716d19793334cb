"""ParquetReader: rows through their row groups, a byte budget on the decoded groups kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.errors import FormatError
from stoker.pipeline.parquet_read import ParquetReader
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
