"""``.pickle`` parts through a real loader: numpy arrays reach the task encoder, code does not run.

The pattern of NeMo's diffusion data module: crude samples whose ``pickle`` part holds a numpy
array (a latent), cooked as they are, and ``encode_sample`` calls ``torch.from_numpy`` on it.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from stoker import (
    Cooker,
    ErrorPolicy,
    LoaderOptions,
    SampleError,
    TaskEncoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import write_shard

SAMPLES = 8


class Latent:
    """A custom object: unpickled only with ``trust_pickles``."""

    def __init__(self, i: int) -> None:
        self.i = i

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Latent) and other.i == self.i

    def __hash__(self) -> int:
        return self.i


class RunsCommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def cook_raw(sample: dict[str, Any]) -> dict[str, Any]:
    return sample


class DiffusionEncoder(TaskEncoder[Any, Any, Any, Any]):
    cookers = (Cooker(cook_raw),)

    def encode_sample(self, sample: dict[str, Any]) -> dict[str, Any]:
        value = sample["pickle"]
        latent = torch.from_numpy(value) if isinstance(value, np.ndarray) else value
        return {"key": sample["__key__"], "latent": latent}


def latent(i: int) -> np.ndarray:
    return np.full((2, 3), i, dtype=np.float32)


def crude(root: Path, pickles: list[bytes]) -> Path:
    write_shard(root / "part_0.tar", [(f"s{i:03d}", {"pickle": p}) for i, p in enumerate(pickles)])
    prepare_dataset(
        str(root),
        split_parts=[("train", "part_")],
        dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
    )
    return root


def load(root: Path, workers: int, options: LoaderOptions | None = None) -> list[dict[str, Any]]:
    dataset = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=None,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=DiffusionEncoder(),
        repeat=False,
        error_policy=ErrorPolicy(mode="raise"),
    )
    with get_loader(dataset, options=options) as loader:
        return list(loader)


@pytest.mark.parametrize("workers", [0, 2])
def test_numpy_arrays_reach_the_task_encoder(tmp_path: Path, workers: int) -> None:
    root = crude(tmp_path / "ds", [pickle.dumps(latent(i)) for i in range(SAMPLES)])
    samples = load(root, workers)
    assert sorted(s["key"] for s in samples) == [f"s{i:03d}" for i in range(SAMPLES)]
    for sample in samples:
        i = int(sample["key"][1:])
        assert isinstance(sample["latent"], torch.Tensor)
        assert torch.equal(sample["latent"], torch.from_numpy(latent(i)))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_command_in_a_pickle_is_refused_and_does_not_run(tmp_path: Path, workers: int) -> None:
    marker = tmp_path / "pwned"
    root = crude(tmp_path / "ds", [pickle.dumps(latent(0)), pickle.dumps(RunsCommand(marker))])
    with pytest.raises(SampleError) as caught:
        load(root, workers)
    message = str(caught.value)
    assert "s001" in message and "'pickle'" in message and "system" in message
    assert "trust_pickles=True" in message
    assert not marker.exists()


def test_a_pickled_function_is_refused(tmp_path: Path) -> None:
    root = crude(tmp_path / "ds", [pickle.dumps(np.load)])
    with pytest.raises(SampleError, match=r"numpy.*load.*not plain data"):
        load(root, 0)


@pytest.mark.parametrize("workers", [0, 2])
def test_trust_pickles_loads_custom_objects(tmp_path: Path, workers: int) -> None:
    root = crude(tmp_path / "ds", [pickle.dumps(Latent(i)) for i in range(SAMPLES)])
    with pytest.raises(SampleError, match="Latent"):
        load(root, workers)
    samples = load(root, workers, LoaderOptions(trust_pickles=True))
    assert sorted(s["latent"].i for s in samples) == list(range(SAMPLES))
