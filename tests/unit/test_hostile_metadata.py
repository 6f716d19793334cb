"""Hostile or broken metadata in a dataset folder gives one stoker error, not a raw exception."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset
from stoker.errors import FormatError, StokerError, StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.info import dataset_info
from stoker.format.prepare import prepare_dataset
from tests.conftest import make_dataset

DEEP = "[" * 100_000


@pytest.fixture
def prepared(tmp_path: Path) -> Path:
    root = make_dataset(tmp_path / "ds", shards=3, per_shard=4)
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1)],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
        num_workers=1,
    )
    return root


def train(root: Path) -> list[str]:
    ds = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=1,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
    )
    keys: list[str] = []
    loader = get_loader(ds)
    for batch in loader:
        keys.extend(batch.__key__)
        if len(keys) >= 12:
            break
    return keys


def test_the_fixture_loads(prepared: Path) -> None:
    assert len(train(prepared)) == 12


@pytest.mark.parametrize(
    ("file", "content", "words"),
    [
        (".info.json", b'{"shard_counts": {"\xff\xfe": 1}}', "not UTF-8"),
        ("dataset.yaml", b"sample_type: \xff\xfe\n", "not UTF-8"),
        (".info.json", DEEP.encode(), "nested too deeply"),
        ("dataset.yaml", DEEP.encode(), "nested too deeply"),
    ],
)
def test_unreadable_metadata_is_a_format_error(
    prepared: Path, file: str, content: bytes, words: str
) -> None:
    target = prepared / ".nv-meta" / file
    target.write_bytes(content)
    for call in (lambda: dataset_info(str(prepared)), lambda: train(prepared)):
        with pytest.raises(FormatError) as info:
            call()
        assert words in info.value.problem
        assert info.value.path is not None and info.value.path.endswith(file)
        assert info.value.hint


def test_deep_split_yaml_is_a_format_error(prepared: Path) -> None:
    (prepared / ".nv-meta" / "split.yaml").write_text(DEEP)
    with pytest.raises(FormatError, match="nested too deeply"):
        dataset_info(str(prepared))


@pytest.mark.parametrize("count", [2**62, -1, 1.5, True])
def test_absurd_shard_count_is_a_format_error(prepared: Path, count: object) -> None:
    info = prepared / ".nv-meta" / ".info.json"
    raw = json.loads(info.read_text())
    raw["shard_counts"]["shard_000.tar"] = count
    info.write_text(json.dumps(raw))
    for call in (lambda: dataset_info(str(prepared)), lambda: train(prepared)):
        with pytest.raises(FormatError, match="invalid sample count") as err:
            call()
        assert err.value.hint


def test_absurd_total_is_a_format_error(prepared: Path) -> None:
    info = prepared / ".nv-meta" / ".info.json"
    raw = json.loads(info.read_text())
    raw["shard_counts"] = dict.fromkeys(raw["shard_counts"], 2**39)
    info.write_text(json.dumps(raw))
    with pytest.raises(FormatError, match="samples in all"):
        train(prepared)


def test_shard_deleted_after_prepare_is_a_storage_error(prepared: Path) -> None:
    (prepared / "shard_001.tar").unlink()
    with pytest.raises(StokerError) as err:
        train(prepared)
    assert isinstance(err.value, StorageError)
    assert "shard_001.tar" in str(err.value.path)
    assert "prepare" in (err.value.hint or "")
