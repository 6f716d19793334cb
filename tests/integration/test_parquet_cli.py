"""``stoker info`` and ``stoker lint`` of a Parquet folder written by Hugging Face ``datasets``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_parquet_dataset import FILES, ROWS_PER_FILE, write_parquet

pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("datasets")


def _stoker(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "stoker.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_parquet(tmp_path_factory.mktemp("pq-cli") / "ds")
    return write_parquet(root, "validation", files=1, first=1000)


def test_info_lists_splits_rows_and_columns(folder: Path) -> None:
    result = _stoker("info", str(folder), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["kind"] == "parquet" and report["shards"] == FILES + 1
    splits = {s["name"]: (s["shards"], s["samples"]) for s in report["splits"]}
    assert splits == {"train": (FILES, FILES * ROWS_PER_FILE), "validation": (1, ROWS_PER_FILE)}
    assert report["columns"] == ["image", "text", "n", "tags"]
    assert report["media_columns"] == {"image": "image"}
    text = _stoker("info", str(folder)).stdout
    assert "image (image), text, n, tags" in text and "Parquet" in text


def test_lint_reads_every_row_group_and_names_a_damaged_one(folder: Path, tmp_path: Path) -> None:
    clean = _stoker("lint", str(folder))
    assert clean.returncode == 0, clean.stderr
    assert f"checked {FILES + 1} files, {(FILES + 1) * ROWS_PER_FILE} samples" in clean.stdout

    damaged = tmp_path / "ds"
    shutil.copytree(folder, damaged)
    name = "data/train-00001-of-00003.parquet"
    column = pq.ParquetFile(damaged / name).metadata.row_group(2).column(0)
    offset = column.dictionary_page_offset if column.has_dictionary_page else None
    offset = column.data_page_offset if offset is None else offset
    data = bytearray((damaged / name).read_bytes())
    data[offset : offset + 64] = b"\xab" * 64  # the page header of row group 2
    (damaged / name).write_bytes(bytes(data))
    result = _stoker("lint", str(damaged))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"{name}, byte offset {offset}: row group 2 cannot be read" in output
    assert "Traceback" not in output


def test_bench_loads_the_rows_at_each_worker_count(folder: Path) -> None:
    result = _stoker(
        "bench", str(folder), "--workers", "0,2", "--batches", "3", "--batch-size", "4", "--json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(r["workers"], r["batches"], r["samples"]) for r in runs] == [(0, 3, 12), (2, 3, 12)]
    assert all(r["samples_per_s"] > 0 and r["skipped"] == 0 for r in runs)
