"""The parts of ``Loader.stats()`` that need no loader: the stage clock, the envelope on the wire,
the collector's arithmetic, blend targets and the flat view."""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from stoker.pipeline import stage_clock
from stoker.pipeline.skips import Skips
from stoker.pipeline.stage_clock import DECODE, READ, StageClock, StageDelta
from stoker.runtime.envelope import BATCH, Envelope
from stoker.runtime.stats import StatsCollector
from stoker.runtime.stats_view import LoaderStats, target_shares
from stoker.storage.options import from_env
from tests.conftest import ManualClock


def test_stage_time_is_exclusive_and_switch_moves_on(monkeypatch: pytest.MonkeyPatch) -> None:
    time = ManualClock()  # moved by the test: exact figures, whatever the machine's load
    monkeypatch.setattr(stage_clock, "perf_counter", time)
    clock = StageClock()
    clock.start(READ)
    time.advance(0.02)
    clock.start(DECODE)  # read pauses
    time.advance(0.1)
    clock.stop()
    clock.switch(DECODE)  # read ends, decode goes on
    time.advance(0.02)
    clock.stop()
    seconds = clock.delta().seconds
    assert seconds["read"] == pytest.approx(0.02)  # not the 0.1 s of decode inside it
    assert seconds["decode"] == pytest.approx(0.12)
    assert clock.delta().seconds == {}  # a delta clears


def test_a_switched_off_clock_measures_nothing() -> None:
    clock = StageClock()
    clock.enabled = False
    clock.start(READ)
    clock.stop()
    assert clock.delta().seconds == {}


def test_the_envelope_pickles_with_all_it_carries() -> None:
    skips = Skips()
    skips.add("loading: ValueError", source="/d", key="k")
    delta = StageDelta({"read": 0.5}, busy=0.6, wall=1.0, storage={"requests": 3})
    item = Envelope(BATCH, 1, 4, [1, 2], [3, 0], {"pack": {}}, skips, 2, delta)
    back = pickle.loads(pickle.dumps(item))
    assert back == item and not hasattr(back, "__dict__")  # slots


def test_the_collector_adds_up_workers_and_windows() -> None:
    collector = StatsCollector()
    for worker in (0, 1):
        delta = StageDelta({"decode": 1.0, "read": 0.25}, busy=1.5, wall=2.0)
        delta.storage = {"read_ahead_hits": 3, "read_ahead_misses": 1}
        delta.gauges = {"rss": 100, "slots": 2, "slot_bytes": 10}
        collector.received(Envelope(BATCH, worker, worker, samples=4, stats=delta))
        now = time.perf_counter()
        collector.handed_out(now - 0.03, now)
    stats = collector.snapshot({"/a": 6, "/b": 2}, {"/a": 0.75, "/b": 0.25})
    assert (stats.batches, stats.samples) == (2, 8)
    assert stats.stage_seconds == {"read": 0.5, "decode": 2.0} and stats.bottleneck == "decode"
    assert stats.other_s == pytest.approx(0.5)
    assert stats.workers[1].utilisation == pytest.approx(0.75)
    assert (stats.shm_slots, stats.shm_bytes) == (4, 20)
    assert stats.storage["read_ahead_hit_rate"] == pytest.approx(0.75)
    assert stats.datasets["/a"].share == pytest.approx(0.75) and stats.datasets["/a"].target == 0.75
    assert stats.bound == "data"  # the loop did nothing but wait
    collector.snapshot({"/a": 6, "/b": 2}, None, reset=True)
    after = collector.snapshot({"/a": 7, "/b": 2}, None)
    assert (after.batches, after.stage_seconds, after.datasets["/a"].samples) == (0, {}, 1)


@dataclass
class _Source:
    path: str
    total: int


def test_targets_of_weighted_epochized_and_mixed_blends() -> None:
    sources = [_Source("/a", 100), _Source("/b", 300)]
    weighted = SimpleNamespace(
        blend=SimpleNamespace(kind="weighted", factors=(5, 2)), sources=sources
    )
    assert target_shares(weighted) == pytest.approx({"/a": 5 / 7, "/b": 2 / 7})
    epochized = SimpleNamespace(
        blend=SimpleNamespace(kind="epochized", factors=(2, 1)), sources=sources
    )
    assert target_shares(epochized) == pytest.approx({"/a": 0.4, "/b": 0.6})
    single = SimpleNamespace(blend=SimpleNamespace(kind="single", factors=()), sources=[sources[0]])
    assert target_shares(single) is None
    mix = SimpleNamespace(weights=(1.0, 3.0), datasets=[single, weighted])
    assert target_shares(mix) == pytest.approx({"/a": 0.25 + 0.75 * 5 / 7, "/b": 0.75 * 2 / 7})
    single.batch_size, weighted.batch_size = 4, 2  # weights count sub-batches
    assert target_shares(mix) == pytest.approx({"/a": 0.4 + 0.6 * 5 / 7, "/b": 0.6 * 2 / 7})


def test_flat_names_for_dashboards() -> None:
    stats = LoaderStats(batches=2, data_wait_frac=0.5, stage_seconds={"decode": 1.5})
    stats.skipped = {"shard: corrupt": 1}
    flat = stats.flat()
    assert flat["data/wait_frac"] == 0.5 and flat["data/stage/decode_s"] == 1.5
    assert flat["data/skipped/shard: corrupt"] == 1.0
    assert all(isinstance(v, float) for v in flat.values())


def test_stoker_stats_switches_the_clock_off() -> None:
    assert from_env({}).stats is True
    assert from_env({"STOKER_STATS": "0"}).stats is False
    assert from_env({"STOKER_STATS": "off"}).stats is False
