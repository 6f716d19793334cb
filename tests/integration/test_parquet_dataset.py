"""Parquet datasets written by Hugging Face ``datasets``: crude and typed samples, splits, row
groups read on demand, real workers, and exact save/restore."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from stoker import CaptioningSample, WorkerConfig, get_savable_loader, get_train_dataset
from stoker.errors import ConfigError
from stoker.sources.load import load_source

datasets = pytest.importorskip("datasets")
Image = pytest.importorskip("PIL.Image")

ROWS_PER_FILE = 30
FILES = 3


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), (i % 256, (7 * i) % 256, 3)).save(buf, format="PNG")
    return buf.getvalue()


def write_parquet(root: Path, split: str = "train", files: int = FILES, first: int = 0) -> Path:
    """``files`` files of ``ROWS_PER_FILE`` rows (row groups of 8) in Hugging Face's layout."""
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "text": datasets.Value("string"),
            "n": datasets.Value("int64"),
            "tags": datasets.Sequence(datasets.Value("string")),
        }
    )
    (root / "data").mkdir(parents=True, exist_ok=True)
    for f in range(files):
        rows = range(first + f * ROWS_PER_FILE, first + (f + 1) * ROWS_PER_FILE)
        table = datasets.Dataset.from_dict(
            {
                "image": [{"bytes": _png(i), "path": None} for i in rows],
                "text": [f"caption {i}" for i in rows],
                "n": list(rows),
                "tags": [[f"t{i}", "x"] for i in rows],
            },
            features=features,
        )
        table.to_parquet(
            str(root / "data" / f"{split}-{f:05d}-of-{files:05d}.parquet"), batch_size=8
        )
    return root


def _uint8(image: torch.Tensor) -> torch.Tensor:
    """The default decoder's float image (0..1) as the bytes it came from."""
    return (image * 255).round().to(torch.uint8)


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_parquet(tmp_path_factory.mktemp("pq") / "ds")
    write_parquet(root, "validation", files=1, first=1000)
    return root


def _loader(path: Path, workers: int, **kwargs: Any) -> Any:
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        str(path),
        batch_size=kwargs.pop("batch_size", None),
        shuffle_buffer_size=kwargs.pop("shuffle_buffer_size", 20),
        max_samples_per_sequence=kwargs.pop("max_samples_per_sequence", 7),
        worker_config=config,
        **kwargs,
    )
    return get_savable_loader(dataset)


def test_crude_rows_are_columns_with_images_decoded(hf_folder: Path) -> None:
    loader = _loader(hf_folder, 0, shuffle_buffer_size=None, max_samples_per_sequence=None)
    seen = {}
    for sample, _ in zip(loader, range(FILES * ROWS_PER_FILE), strict=False):
        seen[sample["n"]] = sample
    assert sorted(seen) == list(range(FILES * ROWS_PER_FILE))  # the train split only, each once
    sample = seen[37]
    assert sample["text"] == "caption 37" and sample["tags"] == ["t37", "x"]
    expected = np.array(Image.open(io.BytesIO(_png(37))).convert("RGB"))
    assert isinstance(sample["image"], torch.Tensor)
    assert torch.equal(_uint8(sample["image"]), torch.from_numpy(expected).permute(2, 0, 1))
    assert sample["__key__"] == "data/train-00001-of-00003.parquet/7"


def test_hf_split_names_give_the_splits(hf_folder: Path) -> None:
    val = load_source(str(hf_folder), split_part="val" + "idation")
    assert val.shards == ("data/validation-00000-of-00001.parquet",)
    assert int(val.counts.sum()) == ROWS_PER_FILE
    train = load_source(str(hf_folder))
    assert len(train.shards) == FILES and int(train.counts.sum()) == FILES * ROWS_PER_FILE
    with pytest.raises(ConfigError, match=r"no Parquet files of split .test.*train, validation"):
        load_source(str(hf_folder), split_part="test")


def test_typed_samples_after_prepare_with_a_field_map(tmp_path: Path) -> None:
    root = write_parquet(tmp_path / "ds", files=2)
    command = [sys.executable, "-m", "stoker.cli", "prepare", str(root), "--non-interactive"]
    bad = subprocess.run(
        [
            *command,
            "--sample-type",
            "CaptioningSample",
            "--field-map",
            '{"image": "img", "caption": "text"}',
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "column 'img'" in bad.stderr and "Traceback" not in bad.stderr
    good = subprocess.run(
        [
            *command,
            "--sample-type",
            "CaptioningSample",
            "--field-map",
            '{"image": "image", "caption": "text"}',
        ],
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stderr
    assert "train 60 rows" in good.stdout
    loader = _loader(root, 0, shuffle_buffer_size=None, max_samples_per_sequence=None)
    samples = [s for s, _ in zip(loader, range(60), strict=False)]
    assert all(isinstance(s, CaptioningSample) for s in samples)
    assert sorted(s.caption for s in samples) == sorted(f"caption {i}" for i in range(60))
    first = next(s for s in samples if s.caption == "caption 41")
    expected = np.array(Image.open(io.BytesIO(_png(41))).convert("RGB"))
    assert torch.equal(_uint8(first.image), torch.from_numpy(expected).permute(2, 0, 1))


def test_only_the_needed_columns_and_row_groups_are_read(hf_folder: Path) -> None:
    from stoker.format.dataset_config import DatasetConfig, parse_field_map

    source = load_source(str(hf_folder))
    config = DatasetConfig(
        "TextSample", "stoker", field_map=parse_field_map({"text": "text"}, "test")
    )
    reader = source.__class__(**{**source.__dict__, "config": config}).reader()
    raw = reader.read(1, 9)  # row group 1 of the second file (groups of 8 rows)
    assert raw.parts == {"text": "caption 39"}  # no image bytes read or decoded
    for index in range(8, 16):
        reader.read(1, index)
    assert reader.groups_read == 1
    reader.read(1, 29)
    assert reader.groups_read == 2
    reader.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_save_restore_mid_epoch_continues_exactly(hf_folder: Path, workers: int) -> None:
    def keys(loader: Any, n: int) -> list[list[str]]:
        return [list(batch["__key__"]) for _, batch in zip(range(n), loader, strict=False)]

    reference = _loader(hf_folder, workers, batch_size=4)
    expected = keys(reference, 20)  # over one epoch (90 rows): into the second
    loader = _loader(hf_folder, workers, batch_size=4)
    assert keys(loader, 9) == expected[:9]
    state = loader.save_state_rank()
    resumed = _loader(hf_folder, workers, batch_size=4)
    resumed.restore_state_rank(state)
    assert keys(resumed, 11) == expected[9:]
    seen = {k for batch in expected for k in batch}
    assert len(seen) >= 60 and all("/train-" in k for k in seen)  # rows of the train split


def test_metadataset_blends_a_parquet_folder_with_a_subset(tmp_path: Path) -> None:
    from stoker.format.prepare import prepare_dataset
    from tests.conftest import make_dataset

    write_parquet(tmp_path / "pq")  # 90 rows; the subset keeps the first 30
    make_dataset(tmp_path / "tars", shards=2, per_shard=20)
    prepare_dataset(
        str(tmp_path / "tars"),
        split_ratio="1,0,0",
        dataset_yaml={"__module__": "megatron.energon", "__class__": "CrudeWebdataset"},
    )
    (tmp_path / "mix.yaml").write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n"
        "      - weight: 3\n        path: ./pq\n        subset: {range: [0, 30]}\n"
        "        subflavors: {origin: parquet}\n"
        "      - weight: 1\n        path: ./tars\n"
    )
    loader = _loader(tmp_path / "mix.yaml", 2, shuffle_buffer_size=10)
    samples = [s for _, s in zip(range(800), loader, strict=False)]
    rows = [s for s in samples if ".parquet/" in s["__key__"]]
    share = len(rows) / len(samples)
    assert 0.7 <= share <= 0.8, share  # weight 3 of 4
    assert {s["n"] for s in rows} == set(range(30))  # the subset, every row of it
    assert all(s["__subflavors__"] == {"origin": "parquet"} for s in rows)
