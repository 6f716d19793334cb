"""``@stateless(failure_tolerance=N)`` per hook, and :class:`FatalSampleError` at every limit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    DefaultTaskEncoder,
    FatalSampleError,
    StokerError,
    TextSample,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    stateless,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import make_dataset

SHARDS, PER_SHARD = 4, 50


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = make_dataset(tmp_path_factory.mktemp("tolerance"), shards=SHARDS, per_shard=PER_SHARD)
    yaml = make_dataset_yaml("TextSample", {"text": "txt"})
    prepare_dataset(str(path), split_parts=[("train", "shard_*")], dataset_yaml=yaml)
    return path


def run(root: Path, encoder: Any, workers: int = 0, batch_size: int | None = None) -> list[Any]:
    dataset = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=batch_size,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=encoder,
        repeat=False,
    )
    with get_loader(dataset) as loader:
        return list(loader)


class FailsAlways(DefaultTaskEncoder[Any, Any, Any, Any]):
    @stateless(failure_tolerance=5)
    def encode_sample(self, sample: TextSample) -> TextSample:
        raise ValueError(f"bad {sample.__key__}")


class FailsFirst(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Fails the first 150 samples it sees (in one process: no workers), then none."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def encode_sample(self, sample: TextSample) -> TextSample:
        self.calls += 1
        if self.calls <= 150:
            raise ValueError(f"bad {sample.__key__}")
        return sample


class TolerantFailsFirst(FailsFirst):
    @stateless(failure_tolerance=200)
    def encode_sample(self, sample: TextSample) -> TextSample:
        return super().encode_sample(sample)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_hooks_tolerance_stops_the_run_with_a_fatal_error(root: Path, workers: int) -> None:
    with pytest.raises(FatalSampleError) as caught:
        run(root, FailsAlways(), workers)
    message = str(caught.value)
    assert "encode_sample failed 5 times in a row (its failure_tolerance=5)" in message
    assert "ValueError: bad" in message and "failure_tolerance=N" in message
    assert isinstance(caught.value, StokerError)


def test_a_tolerance_above_the_policy_limit_lets_the_run_go_on(root: Path) -> None:
    """150 failures in a row: over the policy's 100, within the hook's 200."""
    with pytest.raises(FatalSampleError, match="100 samples failed in a row"):
        run(root, FailsFirst())
    samples = run(root, TolerantFailsFirst())
    assert len(samples) == SHARDS * PER_SHARD - 150


def test_tolerance_zero_means_no_limit(root: Path) -> None:
    class NoLimit(DefaultTaskEncoder[Any, Any, Any, Any]):
        @stateless(failure_tolerance=0)
        def encode_sample(self, sample: TextSample) -> TextSample:
            raise ValueError("bad")

    assert run(root, NoLimit()) == []  # every sample skipped, none stopped the run


def test_the_encoders_default_tolerance_applies_to_each_hook(root: Path) -> None:
    class BadBatches(DefaultTaskEncoder[Any, Any, Any, Any]):
        __default_failure_tolerance__ = 3

        def batch(self, samples: list[Any]) -> Any:
            raise ValueError("cannot batch")

    with pytest.raises(FatalSampleError, match=r"batch failed 3 times in a row"):
        run(root, BadBatches(), batch_size=4)


def test_energons_name_is_stokers_error() -> None:
    """Under the alias, Energon's ``megatron.energon.errors.FatalSampleError`` is stoker's (a
    fresh process: the alias replaces the real package for the whole process)."""
    code = (
        "import stoker.energon_alias as a; a.install()\n"
        "from megatron.energon.errors import FatalSampleError\n"
        "import stoker\n"
        "assert FatalSampleError is stoker.FatalSampleError\n"
        "assert issubclass(FatalSampleError, stoker.StokerError)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
