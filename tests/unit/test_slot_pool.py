"""The claim table of :class:`stoker.pipeline.slot_pool.SlotPool`, across real forked processes."""

from __future__ import annotations

import multiprocessing
from typing import Any

import torch

from stoker.pipeline.slot_pool import SlotPool, aligned, pool_slots

CONTEXT = multiprocessing.get_context("fork")


def test_claims_take_the_lowest_free_slot_and_never_wait() -> None:
    pool = SlotPool(CONTEXT, slots=2, slot_bytes=1 << 20)
    assert [pool.claim(), pool.claim()] == [0, 1]
    assert pool.claim() is None  # all claimed: the worker builds its batch elsewhere
    assert pool.waited == 0.0
    pool.free(1)
    assert pool.claim() == 1
    pool.free(0)
    pool.free(1)
    assert pool.claim() == 0  # the lowest: pages already touched are reused first


def test_a_worker_that_ran_ahead_leaves_a_slot_to_each_other_worker() -> None:
    pool = SlotPool(CONTEXT, slots=3, owners=2, slot_bytes=1 << 20)
    assert [pool.claim(owner=1), pool.claim(owner=1)] == [0, 1]
    assert pool.claim(owner=1) is None  # at its most
    assert pool.claim(owner=0) == 2  # the batch due next still gets a slot
    pool.free(2)  # owner 0's slot frees nothing for owner 1
    assert pool.claim(owner=1) is None
    pool.free(0)
    assert pool.claim(owner=1) == 0


def test_a_loaders_pool_holds_the_batches_in_flight_and_those_the_loop_keeps() -> None:
    # W=2, prefetch 2: 4 in flight, 6 the loop may keep, a spare; a worker holds at most its 2
    # in flight, its share of the kept ones (3) and a spare
    assert pool_slots(2, 2) == (11, 6)
    assert pool_slots(1, 2) == (7, 7)
    assert pool_slots(8, 4) == (32 + 34 + 1, 4 + 5 + 1)
    pool = SlotPool.for_loader(CONTEXT, workers=2, prefetch_factor=2)
    assert len(pool) == 11
    claimed = [pool.claim(owner=0) for _ in range(7)]
    assert claimed == [0, 1, 2, 3, 4, 5, None]  # at its most: the rest are the other's
    assert [pool.claim(owner=1) for _ in range(6)] == [6, 7, 8, 9, 10, None]


def _claim_and_write(pool: SlotPool, results: Any) -> None:
    number = pool.claim()
    if number is not None:
        pool.array(number)[:4] = 7
    results.put(number)


def test_a_slot_freed_in_one_process_is_claimed_and_written_in_another() -> None:
    pool = SlotPool(CONTEXT, slots=1, slot_bytes=1 << 20)
    assert pool.claim() == 0
    pool.free(0)
    results = CONTEXT.Queue()
    child = CONTEXT.Process(target=_claim_and_write, args=(pool, results))
    child.start()
    try:
        assert results.get(timeout=60) == 0
        assert pool.array(0)[:5].tolist() == [7, 7, 7, 7, 0]  # the same pages, shared
        assert pool.claim() is None  # the child holds it
    finally:
        child.join(30)
        results.close()
    assert child.exitcode == 0


def test_tensors_in_a_slot_start_on_aligned_offsets() -> None:
    assert [aligned(n) for n in (1, 64, 65, 1000)] == [64, 64, 128, 1024]


def test_batches_larger_than_a_pool_slot_take_slots_of_their_own() -> None:
    from stoker.pipeline.transport import MIN_SLOT_BYTES, WorkerTransport

    pool = SlotPool(CONTEXT, slots=2, slot_bytes=2 * MIN_SLOT_BYTES)
    releases = CONTEXT.Queue()
    try:
        transport = WorkerTransport(releases, None, pool=pool)
        small = transport.buffer((MIN_SLOT_BYTES,), torch.uint8)
        assert small is not None and pool.number(small.untyped_storage()) == 0
        assert transport.export({"images": small}).plain is False
        assert transport.slots == {} and pool.touched() == (1, MIN_SLOT_BYTES)
        large = transport.buffer((3 * MIN_SLOT_BYTES,), torch.uint8)  # over a pool slot
        assert large is not None and pool.number(large.untyped_storage()) is None
        assert len(transport.slots) == 1  # its own slot, within the usual budget
        transport.export({"images": large})
        assert pool.claim() == 1  # slot 0 is held by the first batch; 1 was never claimed
    finally:
        releases.close()


def test_a_worker_short_of_slots_builds_elsewhere_at_once_and_counts_it() -> None:
    from stoker.pipeline.transport import MIN_SLOT_BYTES, WorkerTransport

    pool = SlotPool(CONTEXT, slots=1, slot_bytes=2 * MIN_SLOT_BYTES)
    releases = CONTEXT.Queue()
    try:
        transport = WorkerTransport(releases, None, pool=pool)
        first = transport.buffer((MIN_SLOT_BYTES,), torch.uint8)
        assert first is not None and pool.number(first.untyped_storage()) == 0
        transport.export({"images": first})  # the loop keeps it: the slot stays claimed
        assert transport.buffer((MIN_SLOT_BYTES,), torch.uint8) is None  # a fresh segment
        assert transport.counters["slot_fallbacks"] == 1
        assert transport.counters["slot_waits"] == 0
        transport.export({"images": torch.zeros(MIN_SLOT_BYTES, dtype=torch.uint8)})
        pool.free(0)  # the loop let go of the first batch
        again = transport.buffer((MIN_SLOT_BYTES,), torch.uint8)
        assert again is not None and pool.number(again.untyped_storage()) == 0
        assert transport.counters["slot_fallbacks"] == 1
    finally:
        releases.close()
