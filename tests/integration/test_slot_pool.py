"""Batch slots shared by all the workers of a loader (:mod:`stoker.pipeline.slot_pool`).

Real forked workers decode JPEGs into shared slots: batches the loop keeps must never be written
over while later ones arrive (the workers take fresh segments where every slot is held),
freed slots must be reused by whichever worker needs one, and every batch must equal the one
built in process (W=0), pixel for pixel, padding included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    LoaderOptions,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_val_dataset,
)
from stoker.pipeline.slot_pool import SlotPool, pool_slots
from stoker.pipeline.transport import MIN_SLOT_BYTES
from tests.integration._images import make_noise_jpeg_dataset

#: (width, height): batches of 4 are over MIN_SLOT_BYTES as uint8, so they use slots.
SIZES = [(420, 300), (260, 410), (400, 390), (300, 280), (330, 200), (410, 350), (380, 420),
         (290, 310)]  # fmt: skip
BATCH = 4
SHARDS = 3  # one per worker at W=3


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pool") / "ds"
    return make_noise_jpeg_dataset(root, SIZES, quality=80, shards=SHARDS)


def loader(root: Path, mode: str, workers: int, **kwargs: Any) -> Any:
    class Encoder(DefaultTaskEncoder[Any, Any, Any, Any]):
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]

    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH,
        task_encoder=Encoder(),
    )
    return get_loader(dataset, **kwargs)


def by_keys(batches: list[Any]) -> dict[tuple[str, ...], torch.Tensor]:
    return {tuple(b.__key__): b.image for b in batches}


def pool_of(running: Any) -> SlotPool:
    """The slot pool of a running loader (its workers' shared slots)."""
    pool = running._live._transport.pool
    assert isinstance(pool, SlotPool)
    return pool


def in_pool(image: torch.Tensor, pool: SlotPool) -> bool:
    return pool.number(image.untyped_storage()) is not None


@pytest.fixture(scope="module")
def in_process(dataset_root: Path) -> dict[str, dict[tuple[str, ...], torch.Tensor]]:
    """The batches built in the main process (W=0), by mode."""
    return {m: by_keys(list(loader(dataset_root, m, 0))) for m in ("torchrgb8", "torchrgb")}


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("mode", ["torchrgb8", "torchrgb"])
def test_batches_the_loop_keeps_stay_intact_while_later_ones_arrive(
    dataset_root: Path, in_process: Any, mode: str, workers: int
) -> None:
    expected = in_process[mode]
    running = loader(dataset_root, mode, workers)
    held: list[Any] = []
    for batch in running:
        pool = pool_of(running)
        assert len(pool) == pool_slots(workers, 2)[0]
        held.append(batch)
        for earlier in held:  # none written over by the batches that came after it
            assert torch.equal(earlier.image, expected[tuple(earlier.__key__)])
    assert len(held) == len(expected) == SHARDS * len(SIZES) // BATCH
    if mode == "torchrgb8":  # the first ones in shared slots, the rest in fresh segments
        assert held[0].image.numel() > MIN_SLOT_BYTES
        assert 1 <= sum(in_pool(b.image, pool) for b in held) <= len(pool)
    assert by_keys(held).keys() == expected.keys()


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("mode", ["torchrgb8", "torchrgb"])
def test_freed_slots_go_to_whichever_worker_builds_next(
    dataset_root: Path, in_process: Any, mode: str, workers: int
) -> None:
    expected = in_process[mode]
    running = loader(dataset_root, mode, workers)
    slots, seen, pooled = set(), 0, 0
    for batch in running:
        pool = pool_of(running)
        assert torch.equal(batch.image, expected[tuple(batch.__key__)])
        if mode == "torchrgb8":  # float batches are scaled out of their slot on arrival
            number = pool.number(batch.image.untyped_storage())
            if number is not None:  # else every slot was held (a busy machine): fresh memory
                pooled += 1
                slots.add(number)
        seen += 1
        del batch
    assert seen == len(expected)
    if mode == "torchrgb8":  # the lowest free slots are served first
        assert pooled >= 1 and 1 <= len(slots) <= min(pooled, len(pool))
        stats = running.stats()  # the shared slots are counted once (by worker 0, when it reports)
        assert 1 <= stats.shm_slots <= len(pool)
        assert stats.shm_bytes >= BATCH * 3 * 300 * 420
        assert pooled + stats.slot_fallbacks == seen  # the others were counted


def test_a_fixed_slot_budget_keeps_slots_per_worker(dataset_root: Path, in_process: Any) -> None:
    running = loader(dataset_root, "torchrgb8", 2, options=LoaderOptions(batch_slots_mb=64))
    batches = []
    for batch in running:
        assert running._live._transport.pool is None
        batches.append(batch)
    assert by_keys(batches).keys() == in_process["torchrgb8"].keys()
    for batch in batches:
        assert torch.equal(batch.image, in_process["torchrgb8"][tuple(batch.__key__)])
