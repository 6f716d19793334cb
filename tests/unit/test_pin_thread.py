"""The pin-memory thread (``runtime/pin_thread.py``) with an injected pin function: order kept,
items pinned ahead on another thread, failures raised where the item would have been, clean
shutdown (no GPU needed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from stoker.runtime.pin_thread import PinThread


def source_of(values: Iterator[int]) -> tuple[PinThread[int], list[str]]:
    threads: list[str] = []

    def pin(value: int) -> int:
        threads.append(threading.current_thread().name)
        return value * 10

    return PinThread(lambda: next(values), pin, depth=3), threads


def test_items_leave_in_order_pinned_on_another_thread() -> None:
    thread, threads = source_of(iter(range(100)))
    assert [thread.get() for _ in range(100)] == [v * 10 for v in range(100)]
    with pytest.raises(StopIteration):
        thread.get()
    with pytest.raises(StopIteration):  # and stays ended
        thread.get()
    assert set(threads) == {"stoker-pin-memory"}
    assert thread.close(timeout=5.0)


def test_items_are_pinned_ahead_at_most_depth() -> None:
    """Counted, not timed: each time the thread takes an item from its source, it may be at
    most ``depth`` queued + 1 in hand ahead of the gets begun; the loop waits (on a condition)
    for the thread to fill up before each get, so a thread that ran further ahead would be
    caught taking one too many."""
    depth, total = 2, 20
    asked = 0  # gets begun by the loop
    taken: list[int] = []
    ahead: list[int] = []  # how far ahead of the loop each take was
    took = threading.Condition()

    def source() -> int:
        with took:
            if len(taken) == total:
                raise StopIteration
            taken.append(len(taken))
            ahead.append(len(taken) - asked)
            took.notify_all()
            return taken[-1]

    thread = PinThread(source, lambda v: v, depth=depth)
    try:
        for n in range(total):
            full = min(total, asked + depth + 1)  # depth queued + 1 pinned, waiting to be queued
            with took:
                assert took.wait_for(lambda full=full: len(taken) >= full, 30)
                asked += 1
            assert thread.get() == n
        with pytest.raises(StopIteration):
            thread.get()
    finally:
        assert thread.close(timeout=5.0)
    assert max(ahead) == depth + 1  # it filled up, and never went further


def test_a_source_error_is_raised_after_the_items_before_it() -> None:
    def values() -> Iterator[int]:
        yield 1
        yield 2
        raise KeyError("shard 7 gone")

    items = values()
    thread = PinThread(lambda: next(items), lambda v: v, depth=4)
    assert [thread.get(), thread.get()] == [1, 2]
    with pytest.raises(KeyError, match="shard 7 gone") as raised:
        thread.get()
    assert any(frame.name == "values" for frame in raised.traceback)  # the source's own frame
    with pytest.raises(StopIteration):
        thread.get()
    assert thread.close(timeout=5.0)


def test_a_pin_error_is_raised_for_its_item() -> None:
    def pin(value: int) -> int:
        if value == 3:
            raise RuntimeError("cannot pin: out of page-locked memory")
        return value

    items = iter(range(10))
    thread = PinThread(lambda: next(items), pin, depth=2)
    assert [thread.get() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="page-locked"):
        thread.get()
    assert thread.close(timeout=5.0)


def test_close_stops_a_thread_waiting_on_a_full_queue() -> None:
    calls = threading.Semaphore(0)

    def source() -> int:  # endless
        calls.release()
        return 1

    thread = PinThread(source, lambda v: v, depth=1)
    for _ in range(2):  # one item queued, the second in hand: the thread waits on the queue
        assert calls.acquire(timeout=30)
    assert thread.alive
    assert thread.close(timeout=30.0)  # ended, not left waiting for a free place
    assert not thread.alive
    with pytest.raises(StopIteration):
        thread.get()


def test_close_waits_at_most_the_timeout_for_a_blocked_source() -> None:
    release, entered = threading.Event(), threading.Event()
    safety = threading.Timer(60.0, release.set)  # the source returns in the end, whatever
    safety.start()

    def source() -> int:
        entered.set()
        release.wait()
        return 0

    thread = PinThread(source, lambda v: v, depth=1)
    try:
        assert entered.wait(30)
        start = time.monotonic()
        assert not thread.close(timeout=0.2)  # still inside the source
        assert 0.19 <= time.monotonic() - start < 30.0  # waited its timeout, not for the source
        assert not release.is_set()
        release.set()
        assert thread.close(timeout=30.0)  # it ends by itself once the source returns
    finally:
        safety.cancel()


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth=0"):
        PinThread(lambda: 1, lambda v: v, depth=0)
