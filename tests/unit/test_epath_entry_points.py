"""Entry points that take a dataset path accept ``pathlib.Path`` and ``EPath`` as well as ``str``.

Energon's users pass ``EPath`` (and Megatron-Bridge passes it to dataset factories); the same
dataset must load, with the same samples, whatever the path's type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    Blender,
    EPath,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
    load_dataset,
    prepare_dataset,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.storage import open_store
from tests.conftest import make_dataset

KINDS: list[Callable[[Path], Any]] = [str, Path, EPath]
TEXT = make_dataset_yaml("TextSample", {"text": "txt"})


def keys(dataset: Any) -> list[str]:
    with get_loader(dataset) as loader:
        return sorted(key for batch in loader for key in batch.__key__)


def val(path: Any, workers: int = 0) -> Any:
    return get_val_dataset(
        path, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers), batch_size=2
    )


@pytest.mark.parametrize("kind", KINDS, ids=["str", "Path", "EPath"])
def test_prepare_load_and_read_with_any_path_type(tmp_path: Path, kind: Any) -> None:
    root = make_dataset(tmp_path / "ds")
    report = prepare_dataset(kind(root), split_parts=[("val", "shard_")], dataset_yaml=TEXT)
    assert report is not None and (root / ".nv-meta" / ".info.json").is_file()
    expected = sorted(f"s{s}_{i:05d}" for s in range(3) for i in range(4))
    assert keys(val(kind(root))) == expected
    assert load_dataset(kind(root)) == str(root)
    (tmp_path / "mds.yaml").write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
        f"  val:\n    path: {root}\n"
    )
    assert sorted(load_dataset(kind(tmp_path / "mds.yaml")).splits) == ["val"]  # type: ignore[union-attr]
    assert keys(val(kind(tmp_path / "mds.yaml"))) == expected
    assert keys(val(Blender([(kind(root), 1.0)]))) == expected
    assert open_store(kind(root)).exists(".nv-meta/.info.json")


def test_epath_dataset_in_two_workers(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", shards=4)
    prepare_dataset(EPath(root), split_parts=[("train", "shard_")], dataset_yaml=TEXT)
    train = get_train_dataset(
        EPath(root), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2, shuffle_buffer_size=4, max_samples_per_sequence=2, repeat=False,
    )  # fmt: skip
    assert keys(train) == sorted(f"s{s}_{i:05d}" for s in range(4) for i in range(4))
