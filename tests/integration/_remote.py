"""Datasets, loaders and emulators shared by the remote-storage tests (S3, HTTP, Azure, GCS)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def emulator(argv: Callable[[int], list[str]], name: str) -> Iterator[int]:
    """Runs the server ``argv(port)`` on a free port of 127.0.0.1 until the block ends (its
    whole process group is killed: the emulators here keep their data in memory) and yields
    the port once it accepts connections."""
    port = free_port()
    proc = subprocess.Popen(
        argv(port), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{name} did not listen within 30 s")
                time.sleep(0.1)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
