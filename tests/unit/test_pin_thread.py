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
    taken: list[int] = []

    def source() -> int:
        taken.append(len(taken))
        return taken[-1]

    thread = PinThread(source, lambda v: v, depth=2)
    try:
        deadline = time.monotonic() + 5
        while len(taken) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
        # 2 queued + 1 waiting to be queued, none taken by the loop yet
        assert len(taken) == 3
        assert thread.get() == 0
        deadline = time.monotonic() + 5
        while len(taken) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(taken) == 4
    finally:
        assert thread.close(timeout=5.0)


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
    thread = PinThread(lambda: 1, lambda v: v, depth=1)  # an endless source
    time.sleep(0.1)
    assert thread.alive
    start = time.monotonic()
    assert thread.close(timeout=5.0)
    assert not thread.alive
    assert time.monotonic() - start < 2.0
    with pytest.raises(StopIteration):
        thread.get()


def test_close_waits_at_most_the_timeout_for_a_blocked_source() -> None:
    release = threading.Event()
    thread = PinThread(lambda: release.wait() and 0, lambda v: v, depth=1)
    start = time.monotonic()
    assert not thread.close(timeout=0.2)  # still inside the source
    assert time.monotonic() - start < 2.0
    release.set()
    deadline = time.monotonic() + 5
    while thread.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not thread.alive  # it ends by itself once the source returns


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth=0"):
        PinThread(lambda: 1, lambda v: v, depth=0)
