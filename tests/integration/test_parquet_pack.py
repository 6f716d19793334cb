"""``stoker pack`` from a Parquet folder written by Hugging Face ``datasets``: a row per sample,
a part per column, typed by ``--field-map`` over columns as ``stoker prepare`` takes it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from stoker import CaptioningSample, WorkerConfig, get_loader, get_train_dataset
from tests.integration.test_parquet_dataset import FILES, ROWS_PER_FILE, _png, write_parquet

pytest.importorskip("datasets")
Image = pytest.importorskip("PIL.Image")

ROWS = FILES * ROWS_PER_FILE


def _stoker(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "stoker.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_parquet(tmp_path_factory.mktemp("pq-pack") / "ds")


def test_rows_become_typed_samples_each_once(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "wds"
    result = _stoker(
        "pack", str(folder), str(out), "--samples-per-shard", "40", "--no-progress", "--json",
        "--prepare", "--sample-type", "CaptioningSample",
        "--field-map", '{"image": "image", "caption": "text"}',
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["samples"] == ROWS and len(report["shards"]) == 3
    assert report["part_names"] == ["image.png", "n.json", "tags.json", "text.txt"]
    yaml = (out / ".nv-meta" / "dataset.yaml").read_text()
    assert "image: image.png" in yaml and "caption: text.txt" in yaml
    dataset = get_train_dataset(
        str(out), batch_size=None, shuffle_buffer_size=None, max_samples_per_sequence=None,
        repeat=False,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        got = list(loader)
    assert all(type(s) is CaptioningSample for s in got)
    by_caption = {s.caption: s for s in got}  # the shards are interleaved: order by row
    assert len(got) == ROWS and sorted(by_caption) == sorted(f"caption {i}" for i in range(ROWS))
    for i in (0, 41, ROWS - 1):
        want = np.asarray(Image.open(io.BytesIO(_png(i))).convert("RGB")).transpose(2, 0, 1)
        image = by_caption[f"caption {i}"].image
        assert (image * 255).round().byte().numpy().tolist() == want.tolist()


def test_each_column_is_a_part_of_its_row(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "wds"
    result = _stoker("pack", str(folder / "data" / "train-00001-of-00003.parquet"), str(out))
    assert result.returncode == 0, result.stderr
    with tarfile.open(out / "shard-000000.tar") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    assert len(members) == 4 * ROWS_PER_FILE
    first = ROWS_PER_FILE  # the file's first row
    assert members["00000000.text.txt"] == f"caption {first}".encode()
    assert json.loads(members["00000000.n.json"]) == first
    assert json.loads(members["00000000.tags.json"]) == [f"t{first}", "x"]
    assert members["00000000.image.png"] == _png(first)


def test_a_field_map_naming_no_column_says_which(folder: Path, tmp_path: Path) -> None:
    result = _stoker(
        "pack", str(folder), str(tmp_path / "wds"), "--no-progress", "--prepare",
        "--sample-type", "CaptioningSample", "--field-map", '{"image": "img", "caption": "text"}',
    )  # fmt: skip
    assert result.returncode != 0
    assert "'image' names the column 'img'" in result.stderr + result.stdout
    assert "image, n, tags, text" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
