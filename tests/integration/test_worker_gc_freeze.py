"""Workers fork with the main process's objects frozen, and the main process thaws them.

Frozen objects are never touched by the workers' full collections, so the pages holding them stay
shared with the main process instead of being copied into each worker. The main process must not
keep them frozen (its garbage would never be collected), and a freeze the user made stays. The
workers' own collector settings: ``test_small_batches.py``.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, SampleDecoder, WorkerConfig, get_loader, get_val_dataset
from tests.integration._images import make_noise_jpeg_dataset


class FreezeCount(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Puts the worker's count of frozen objects into each caption."""

    decoder = SampleDecoder(image_decode="torchrgb8")

    def encode_sample(self, sample: Any) -> Any:
        sample.caption = str(gc.get_freeze_count())
        return sample


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noise_jpeg_dataset(tmp_path_factory.mktemp("freeze") / "ds", [(40, 30)] * 4)


@pytest.fixture
def no_freeze() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def worker_freeze_counts(root: Path) -> list[int]:
    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2,
        task_encoder=FreezeCount(),
    )
    return [int(c) for batch in get_loader(dataset) for c in batch.caption]


def test_workers_start_frozen_and_the_main_process_thaws(root: Path, no_freeze: None) -> None:
    counts = worker_freeze_counts(root)
    assert len(counts) == 8
    assert min(counts) > 1000  # the modules, classes and functions imported before the fork
    assert gc.get_freeze_count() == 0


def tracked(obj: object) -> bool:
    """Whether ``obj`` is in one of the collector's generations (frozen objects are in none)."""
    return any(o is obj for o in gc.get_objects())


def test_a_freeze_the_user_made_is_left_alone(root: Path, no_freeze: None) -> None:
    frozen_by_user = [object()]
    gc.freeze()
    made_after = [object()]
    assert not tracked(frozen_by_user) and tracked(made_after)
    worker_freeze_counts(root)
    assert not tracked(frozen_by_user)  # not thawed
    assert tracked(made_after)  # nor frozen further
