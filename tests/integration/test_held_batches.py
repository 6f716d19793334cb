"""A training loop that keeps batches while it asks for the next, with real forked workers.

Loops keep batches: the previous one for logging, the micro-batches of a gradient accumulation,
Lightning the batch it fetched ahead. The workers build batches in shared slots; while the loop
holds some, a worker must not wait for one to come back (that stalled the loop: the slot it
waited for would come back only after the batch it was to build), nor write into a slot the
loop still holds. Every batch kept stays equal to the one built in process (W=0), the loader's
``stats()`` counts what the workers did (batches in a slot or, where none was free, in fresh
memory; waits for the slot table), and the slots stay within the pool.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import DefaultTaskEncoder, SampleDecoder, WorkerConfig, get_loader, get_val_dataset
from stoker.pipeline.slot_pool import LOCK_SECONDS, SlotPool, pool_slots
from stoker.pipeline.transport import MIN_SLOT_BYTES
from tests.integration._images import make_noise_jpeg_dataset

#: (width, height), twice per shard: batches of 4 are over MIN_SLOT_BYTES as uint8.
SIZES = [(420, 300), (260, 410), (400, 390), (300, 280), (330, 200), (410, 350), (380, 420),
         (290, 310)] * 2  # fmt: skip
BATCH = 4
SHARDS = 4
WORKERS = 2
PREFETCH = 2


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("held") / "ds"
    return make_noise_jpeg_dataset(root, SIZES, quality=80, shards=SHARDS)


def loader(root: Path, mode: str, workers: int) -> Any:
    class Encoder(DefaultTaskEncoder[Any, Any, Any, Any]):
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]

    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH,
        task_encoder=Encoder(),
    )
    return get_loader(dataset, prefetch_factor=PREFETCH)


@pytest.fixture(scope="module")
def in_process(dataset_root: Path) -> dict[str, dict[tuple[str, ...], torch.Tensor]]:
    """The batches built in the main process (W=0), by mode and keys."""
    return {
        mode: {tuple(b.__key__): b.image for b in loader(dataset_root, mode, 0)}
        for mode in ("torchrgb8", "torchrgb")
    }


@pytest.mark.parametrize("hold", [1, 2, 3, 6])
@pytest.mark.parametrize("mode", ["torchrgb8", "torchrgb"])
def test_a_loop_that_keeps_batches_gets_them_intact_and_the_workers_never_wait_for_a_slot(
    dataset_root: Path, in_process: Any, mode: str, hold: int
) -> None:
    expected = in_process[mode]
    running = loader(dataset_root, mode, WORKERS)
    kept: collections.deque[Any] = collections.deque(maxlen=hold)
    pooled = most_pooled = seen = 0
    pool: SlotPool | None = None
    for batch in running:
        pool = running._live._transport.pool
        assert isinstance(pool, SlotPool)
        kept.append(batch)
        seen += 1
        for earlier in kept:  # none written over by the batches that came after it
            assert torch.equal(earlier.image, expected[tuple(earlier.__key__)])
        in_pool = [pool.number(b.image.untyped_storage()) for b in kept]
        pooled += in_pool[-1] is not None
        most_pooled = max(most_pooled, sum(n is not None for n in in_pool))
        if len(kept) == hold:  # the loop really holds `hold` distinct batches
            assert len({id(b.image) for b in kept}) == hold
        del batch
    stats = running.stats()
    print(
        "DEBUG",
        mode,
        hold,
        seen,
        pooled,
        most_pooled,
        stats.slot_fallbacks,
        stats.slot_waits,
        stats.slot_wait_max_s,
        stats.shm_slots,
    )
    assert seen == len(expected) == SHARDS * len(SIZES) // BATCH
    assert pool is not None and len(pool) == pool_slots(WORKERS, PREFETCH)[0]
    # A worker never waits for a slot: the only wait is for the slot table's lock, which gives
    # up after LOCK_SECONDS (twice that: room for a loaded machine's scheduling).
    assert stats.slot_waits == 0 or stats.slot_wait_max_s <= 2 * LOCK_SECONDS
    assert stats.slot_wait_s <= stats.slot_waits * 2 * LOCK_SECONDS
    assert kept[-1].image.numel() * kept[-1].image.element_size() > MIN_SLOT_BYTES
    if mode == "torchrgb8":
        # Each batch was built in a shared slot or, where every slot it could take was held,
        # in fresh memory, and counted: the counts add up to the batches.
        assert pooled + stats.slot_fallbacks == seen
        assert pooled >= 1
        # The slots batches used are the pool's (touched once, reused): at least as many as
        # the loop held at once, at most the pool.
        assert most_pooled <= stats.shm_slots <= len(pool)
        assert min(hold, seen) <= most_pooled + stats.slot_fallbacks
    else:  # float batches are scaled out of their worker's uint8 slot as they are handed out
        assert pooled == 0
        assert stats.slot_fallbacks <= seen
