"""The claim table of :class:`stoker.pipeline.slot_pool.SlotPool`, across real forked processes."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import torch

from stoker.pipeline.slot_pool import SlotPool, aligned

CONTEXT = multiprocessing.get_context("fork")


def test_claims_take_the_lowest_free_slot_and_time_out_when_none_is_free() -> None:
    pool = SlotPool(CONTEXT, slots=2, slot_bytes=1 << 20)
    assert [pool.claim(0.0), pool.claim(0.0)] == [0, 1]
    started = time.perf_counter()
    assert pool.claim(0.05) is None  # all claimed: waits, then gives up
    assert time.perf_counter() - started >= 0.04
    pool.free(1)
    assert pool.claim(0.0) == 1
    pool.free(0)
    pool.free(1)
    assert pool.claim(0.0) == 0  # the lowest: pages already touched are reused first


def test_a_worker_that_ran_ahead_leaves_a_slot_to_each_other_worker() -> None:
    pool = SlotPool(CONTEXT, slots=3, owners=2, slot_bytes=1 << 20)
    assert [pool.claim(0.0, owner=1), pool.claim(0.0, owner=1)] == [0, 1]
    started = time.perf_counter()
    assert pool.claim(0.05, owner=1) is None  # at its most: waits for one of its own
    assert time.perf_counter() - started >= 0.04
    assert pool.claim(0.0, owner=0) == 2  # the batch due next still gets a slot
    pool.free(2)  # owner 0's slot frees nothing for owner 1
    assert pool.claim(0.0, owner=1) is None
    pool.free(0)
    assert pool.claim(0.0, owner=1) == 0


def _state(pid: int | None) -> str:
    """The scheduler state of process ``pid`` (R running, S sleeping, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _claim_and_write(pool: SlotPool, results: Any, freed: Any) -> None:
    results.put(pool.claim(0.0))  # the slot is held: none now
    number = pool.claim(60.0)  # blocks until the parent frees one
    if number is not None:
        pool.array(number)[:4] = 7
    results.put((number, freed.is_set()))


def test_a_worker_waiting_for_a_slot_gets_the_one_freed_and_writes_where_others_read() -> None:
    pool = SlotPool(CONTEXT, slots=1, slot_bytes=1 << 20)
    assert pool.claim(0.0) == 0
    results, freed = CONTEXT.Queue(), CONTEXT.Event()
    child = CONTEXT.Process(target=_claim_and_write, args=(pool, results, freed))
    child.start()
    try:
        assert results.get(timeout=30) is None  # the child found the slot held
        deadline = time.monotonic() + 30
        while _state(child.pid) != "S":  # asleep: waiting in its claim (nothing else blocks)
            assert time.monotonic() < deadline, "the child never waited"
            time.sleep(0.001)
        freed.set()  # before the slot is free: the child's claim cannot return before this
        pool.free(0)
        assert results.get(timeout=30) == (0, True)  # it got the slot freed, after the free
        assert pool.array(0)[:5].tolist() == [7, 7, 7, 7, 0]  # the same pages, shared
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
        assert pool.claim(0.0) == 1  # slot 0 is held by the first batch; 1 was never claimed
    finally:
        releases.close()
