"""Runs read as columns (stoker.runtime.column_runs: token sequences, Parquet rows) are the
samples the plain path builds one by one; a run it cannot take (an index outside the file, a
truncated .bin, a row outside its Parquet file) is left to the plain path, which reports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker.errors import CorruptShardError, FormatError
from stoker.format.binidx import encode_index
from stoker.pipeline.decode import SampleDecoder
from stoker.runtime.build import SampleBuilder
from stoker.runtime.column_runs import applies, column_run
from stoker.sources.binidx import binidx_source
from stoker.sources.load import load_source


def token_file(tmp_path: Path, lengths: list[int], dtype: Any = np.int32) -> tuple[Path, Any]:
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 30_000, sum(lengths)).astype(dtype)
    (tmp_path / "c.bin").write_bytes(tokens.tobytes())
    (tmp_path / "c.idx").write_bytes(encode_index(np.dtype(dtype), lengths, [0, len(lengths)]))
    return tmp_path / "c.bin", tokens


def fields(sample: Any) -> dict[str, Any]:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in sample.items()}


@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.int64])
def test_a_token_run_is_the_plain_paths_samples(tmp_path: Path, dtype: Any) -> None:
    lengths = [5, 0, 7, 1, 300, 2]
    path, tokens = token_file(tmp_path, lengths, dtype)
    source = binidx_source(str(path), "train", {"lang": "en"})
    builder, reader = SampleBuilder(source, None), source.reader()
    assert applies(builder)
    indices = [4, 0, 1, 5, 4, 2]
    refs = [40, 10, 11, 50, 40, 20]
    run = column_run(reader, builder, [0] * len(indices), indices, refs)
    assert run is not None
    raws, samples = run
    plain, failed = builder.assemble_run([reader.read(0, i) for i in indices], refs)
    assert failed is None
    assert [fields(s) for s in samples] == [fields(s) for s in plain]
    assert [type(s) for s in samples] == [type(s) for s in plain]
    starts = np.concatenate(([0], np.cumsum(lengths)))
    for i, sample in zip(indices, samples, strict=True):
        assert sample["tokens"].dtype == np.dtype(dtype)
        assert sample["tokens"].tolist() == tokens[starts[i] : starts[i + 1]].tolist()
        assert not np.shares_memory(sample["tokens"], np.asarray(tokens))
    itemsize = np.dtype(dtype).itemsize
    for raw, i in zip(raws[1:3], indices[1:3], strict=True):  # made when asked for
        assert (raw.key, raw.shard, raw.index, raw.offset) == (
            str(i),
            "c.bin",
            i,
            int(starts[i]) * itemsize,
        )
        assert raw.parts["tokens"].tolist() == reader.read(0, i).parts["tokens"].tolist()


def test_a_run_outside_the_index_or_the_file_goes_to_the_plain_path(tmp_path: Path) -> None:
    path, _ = token_file(tmp_path, [4, 4, 4])
    source = binidx_source(str(path), "train", {})
    builder, reader = SampleBuilder(source, None), source.reader()
    assert column_run(reader, builder, [0, 0], [0, 3], [0, 3]) is None
    read, error = reader.read_run([0, 0], [1, 3])
    assert [r.key for r in read] == ["1"] and isinstance(error, FormatError)
    assert "outside the index" in str(error)
    reader.close()

    path.write_bytes(path.read_bytes()[:-4])  # the last sequence loses a token
    reader = source.reader()
    assert column_run(reader, builder, [0, 0], [0, 2], [0, 2]) is None
    read, error = reader.read_run([0, 0], [0, 2])
    assert [r.key for r in read] == ["0"] and isinstance(error, CorruptShardError)
    reader.close()


def parquet_folder(tmp_path: Path) -> Path:
    """Two Parquet files of 25 and 30 rows in row groups of 7 (pyarrow's writer): text, an
    int, a list and a struct column."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    folder = tmp_path / "rows"
    folder.mkdir()
    for number, rows in enumerate((25, 30)):
        table = {
            "text": [f"row {number}-{i}" for i in range(rows)],
            "n": list(range(rows)),
            "ids": [list(range(i % 4)) for i in range(rows)],
            "meta": [{"a": i, "b": None if i % 3 else "x"} for i in range(rows)],
        }
        pq.write_table(pa.table(table), folder / f"train-{number:05d}-of-00002.parquet", 7)
    return folder


def test_a_parquet_run_across_files_and_row_groups_is_the_plain_paths_samples(
    tmp_path: Path,
) -> None:
    source = load_source(str(parquet_folder(tmp_path)))
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    assert applies(builder)
    shard_ids = [1, 0, 0, 1, 1, 0, 1]
    indices = [29, 0, 24, 7, 6, 3, 0]  # groups of both files, back and forth
    refs = [100 + i for i in range(len(indices))]
    run = column_run(reader, builder, shard_ids, indices, refs)
    assert run is not None
    raws, samples = run
    plain, failed = builder.assemble_run(
        [reader.read(s, i) for s, i in zip(shard_ids, indices, strict=True)], refs
    )
    assert failed is None and list(samples) == plain
    assert samples[0]["text"] == "row 1-29" and samples[0]["meta"] == {"a": 29, "b": None}
    assert samples[2]["__sources__"][0].file_names == tuple(
        f"train-00000-of-00002.parquet/24.{c}" for c in ("text", "n", "ids", "meta")
    )
    assert list(raws) == [reader.read(s, i) for s, i in zip(shard_ids, indices, strict=True)]


def test_a_parquet_run_it_cannot_take_goes_to_the_plain_path(tmp_path: Path) -> None:
    source = load_source(str(parquet_folder(tmp_path)))
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    assert column_run(reader, builder, [0, 0], [3, 25], [3, 25]) is None  # row 25 of 25
    read, error = reader.read_run([0, 0], [3, 25])
    assert len(read) == 1 and isinstance(error, FormatError) and "row 25" in str(error)
