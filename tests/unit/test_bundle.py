"""Small batches leave a worker in bundles (stoker.runtime.bundle)."""

from __future__ import annotations

import pickle

import pytest

from stoker.runtime import bundle as bundle_module
from stoker.runtime.bundle import Bundle, Bundler
from tests.conftest import ManualClock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """The bundler's clock, moved by the test (no sleeps, no windows to miss)."""
    manual = ManualClock()
    monkeypatch.setattr(bundle_module, "perf_counter", manual)
    return manual


def items(bundles: list[Bundle[str]]) -> list[list[str]]:
    return [b.items for b in bundles]


def test_first_item_goes_alone_then_bundles_fill_up_to_the_item_limit() -> None:
    bundler: Bundler[str] = Bundler(max_items=3, max_seconds=60.0)
    sent = [bundler.add(x, 1) for x in "abcdefg"]
    assert [items(s) for s in sent] == [
        [["a"]],
        [],
        [],
        [["b", "c", "d"]],
        [],
        [],
        [["e", "f", "g"]],
    ]
    assert bundler.take() is None


def test_the_byte_limit_sends_the_open_bundle_before_a_large_item() -> None:
    bundler: Bundler[str] = Bundler(max_bytes=100, max_seconds=60.0)
    bundler.add("first", 1)
    assert bundler.add("a", 30) == [] and bundler.add("b", 30) == []
    assert items(bundler.add("huge", 500)) == [["a", "b"], ["huge"]]
    assert bundler.add("c", 60) == []
    assert items(bundler.add("d", 50)) == [["c"]]  # c and d together would be too large
    taken = bundler.take()
    assert taken is not None and taken.items == ["d"]


def test_close_and_time_send_at_once(clock: ManualClock) -> None:
    bundler: Bundler[str] = Bundler(max_seconds=60.0)
    bundler.add("first", 1)
    bundler.add("a", 1)
    assert items(bundler.add("slot batch", 1, close=True)) == [["a", "slot batch"]]
    timed: Bundler[str] = Bundler(max_seconds=0.05)
    timed.add("first", 1)
    clock.advance(0.04)
    assert timed.add("quick", 1) == []
    clock.advance(0.02)
    assert items(timed.add("late", 1)) == [["quick", "late"]]


def test_waiting_between_bundles_does_not_count(clock: ManualClock) -> None:
    bundler: Bundler[str] = Bundler(max_seconds=0.05)
    bundler.add("first", 1)
    clock.advance(0.06)  # the worker waited to be asked for more
    bundler.resumed()
    assert bundler.add("a", 1) == []
    clock.advance(0.04)
    assert bundler.add("b", 1) == []
    clock.advance(0.02)  # 0.06 s of work since it resumed
    assert items(bundler.add("c", 1)) == [["a", "b", "c"]]


def test_a_bundle_pickles_with_its_items_in_order() -> None:
    bundle = Bundle(["x", "y", "z"])
    assert pickle.loads(pickle.dumps(bundle)).items == ["x", "y", "z"]


def test_ring_bytes_close_a_bundle_before_it_outgrows_its_share_of_the_ring() -> None:
    bundler: Bundler[str] = Bundler(max_seconds=60.0)
    bundler.add("first", 0, ring_bytes=500)
    assert bundler.add("a", 0, ring_bytes=400) == []  # no limit until the worker sets one
    bundler.max_ring_bytes = 1000
    assert bundler.add("b", 0, ring_bytes=400) == []
    assert items(bundler.add("c", 0, ring_bytes=400)) == [["a", "b", "c"]]  # 1200 >= 1000
    assert bundler.add("d", 0, ring_bytes=999) == []  # counted afresh in the next bundle
    assert items(bundler.add("e", 0, ring_bytes=1)) == [["d", "e"]]
