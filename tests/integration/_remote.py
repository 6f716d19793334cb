"""Datasets and loaders shared by the remote-storage tests (S3 and HTTP)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import write_shard

TEXT_YAML = make_dataset_yaml("TextSample", {"text": "txt"})


def make_shards(root: Path, name: str, shards: int, per_shard: int) -> Path:
    """Unprepared text shards ``{name}_{s}_{i}``; shard 0 is the val split, the rest train."""
    for s in range(shards):
        samples = [(f"{name}_{s}_{i:04d}", {"txt": name.encode()}) for i in range(per_shard)]
        write_shard(root / name / f"{'val' if s == 0 else 'train'}_{s}.tar", samples)
    return root / name


def prepare_local(root: Path, name: str, shards: int, per_shard: int) -> Path:
    path = make_shards(root, name, shards, per_shard)
    prepare_dataset(
        str(path), split_parts=[("train", "train_"), ("val", "val_")], dataset_yaml=TEXT_YAML
    )
    return path


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


def train_dataset(path: str, workers: int) -> Any:
    """One shuffled epoch of the train split, in batches of 4."""
    return get_train_dataset(
        path, worker_config=config(workers), batch_size=4, shuffle_buffer_size=8,
        max_samples_per_sequence=4, repeat=False,
    )  # fmt: skip


def epoch_keys(path: str, workers: int, split: str = "train") -> list[str]:
    """The keys of one epoch of ``split``, in the order the loader yields them."""
    if split == "train":
        dataset = train_dataset(path, workers)
    else:
        dataset = get_val_dataset(path, worker_config=config(workers), batch_size=4)
    with get_loader(dataset) as loader:
        return [key for batch in loader for key in batch.__key__]


def stoker_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
