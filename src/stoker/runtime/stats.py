"""``Loader.stats()``: is the run data-bound, and why? Added up in the training process.

:class:`StatsCollector` lives in the loader. It times the training loop's ``next()`` calls
(the data wait) and the time between them (the consumer's step), counts the batches and samples
handed out, and adds up what the workers sent with their batches (:class:`Envelope` ``stats``:
seconds per stage, busy time, storage counters, memory). :meth:`StatsCollector.snapshot` turns
it into a :class:`LoaderStats`.

Example:
    >>> for batch in loader:  # the val split: 10 samples in batches of 4
    ...     pass
    >>> stats = loader.stats()
    >>> stats.batches, stats.samples, 0 <= stats.recent_wait_frac <= 1
    (3, 10, True)
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

from stoker.pipeline.pack_stats import summary
from stoker.pipeline.skips import Skips
from stoker.pipeline.stage_clock import STAGES
from stoker.runtime.envelope import Envelope
from stoker.runtime.stats_view import LoaderStats, WorkerStats, bound_of, shares

#: Seconds the "recent" figures cover.
WINDOW = 60.0
#: Width of one bucket of the recent window.
_BUCKET = 1.0


@dataclass
class _Worker:
    seconds: dict[str, float] = field(default_factory=dict)
    busy: float = 0.0
    wall: float = 0.0
    gauges: dict[str, int] = field(default_factory=dict)


class StatsCollector:
    """Adds up what one loader measures (see the module docs)."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._clear()
        self._gauges: dict[int, dict[str, int]] = {}
        self._last_exit: float | None = None
        self._first_batch: float | None = None
        self._created = perf_counter()
        # Buckets of the recent window: [start, wait, wall, batches, samples].
        self._recent: collections.deque[list[float]] = collections.deque()

    def _clear(self) -> None:
        self.batches = self.samples = 0
        self.wait = self.step = 0.0
        self.steps = 0
        self.workers: dict[int, _Worker] = {}
        self.storage: dict[str, int] = {}
        self.packing: dict[str, int] = {}
        self.slots: dict[str, float] = {}
        self.skips = Skips()
        self.since = perf_counter()
        self._pending_samples = 0
        self.dataset_base: dict[str, int] = {}

    # --- fed by the loader ----------------------------------------------------------------------

    def received(self, item: Envelope) -> None:
        """An item came from a worker (before it is handed out, or the stream ends)."""
        if item.skips:
            self.skips.merge(item.skips)
        self._pending_samples += item.samples
        delta = item.stats
        if delta is None:
            return
        worker = self.workers.get(item.worker)
        if worker is None:
            worker = self.workers[item.worker] = _Worker()
        for stage, seconds in delta.seconds.items():
            worker.seconds[stage] = worker.seconds.get(stage, 0.0) + seconds
        worker.busy += delta.busy
        worker.wall += delta.wall
        for name, n in delta.storage.items():
            self.storage[name] = self.storage.get(name, 0) + n
        for name, n in delta.packing.items():
            self.packing[name] = self.packing.get(name, 0) + n
        for name, value in delta.slots.items():
            before = self.slots.get(name, 0)
            self.slots[name] = max(before, value) if name.endswith("_max_s") else before + value
        if delta.gauges:
            self._gauges[item.worker] = delta.gauges

    def handed_out(self, entered: float, left: float) -> None:
        """A batch left ``next()``, which the loop entered at ``entered``."""
        wait = left - entered
        step = 0.0 if self._last_exit is None else max(entered - self._last_exit, 0.0)
        if self._last_exit is not None:
            self.steps += 1
        if self._first_batch is None:
            self._first_batch = left - self._created
        self._last_exit = left
        samples, self._pending_samples = self._pending_samples, 0
        self.batches += 1
        self.samples += samples
        self.wait += wait
        self.step += step
        recent = self._recent
        if not recent or left - recent[-1][0] >= _BUCKET:
            recent.append([left, 0.0, 0.0, 0, 0])
            while recent and left - recent[0][0] > self.window:
                recent.popleft()
        bucket = recent[-1]
        bucket[1] += wait
        bucket[2] += wait + step
        bucket[3] += 1
        bucket[4] += samples

    def paused(self) -> None:
        """The loop stopped iterating (the pass ended): the gap until the next ``next()`` is no
        consumer step."""
        self._last_exit = None

    # --- read by the user -----------------------------------------------------------------------

    def snapshot(
        self,
        datasets: dict[str, int],
        targets: dict[str, float] | None,
        *,
        reset: bool = False,
    ) -> LoaderStats:
        """The figures so far (since the start or the last reset)."""
        now = perf_counter()
        seconds = now - self.since
        stage_seconds, workers = self._per_worker()
        busy = sum(w.busy for w in self.workers.values())
        other = busy - sum(stage_seconds.values())
        r_wait = sum(b[1] for b in self._recent)
        r_wall = sum(b[2] for b in self._recent)
        r_span = now - self._recent[0][0] if self._recent else 0.0
        looped = self.wait + self.step
        base = self.dataset_base
        taken = {k: v - base.get(k, 0) for k, v in datasets.items()}
        wait_frac = self.wait / looped if looped > 0 else 0.0
        recent_frac = r_wait / r_wall if r_wall > 0 else wait_frac
        out = LoaderStats(
            seconds=seconds,
            batches=self.batches,
            samples=self.samples,
            samples_per_s=self.samples / seconds if seconds > 0 else 0.0,
            recent_samples_per_s=sum(b[4] for b in self._recent) / r_span if r_span > 0 else 0.0,
            first_batch_s=self._first_batch,
            data_wait_s=self.wait,
            data_wait_frac=wait_frac,
            recent_wait_frac=recent_frac,
            step_s=self.step / self.steps if self.steps else 0.0,
            stage_seconds=stage_seconds,
            other_s=max(other, 0.0),
            bottleneck=max(stage_seconds, key=stage_seconds.__getitem__) if stage_seconds else None,
            bound=bound_of(recent_frac, self.batches),
            workers=workers,
            skipped=dict(self.skips.by_reason),
            skipped_by_dataset={s: dict(c) for s, c in self.skips.by_source.items()},
            skip_examples={r: list(k) for r, k in self.skips.examples.items()},
            datasets=shares(taken, targets),
            storage=self._storage(),
            packing=summary(self.packing),
            shm_slots=sum(w.slots for w in workers.values()),
            shm_bytes=sum(w.slot_bytes for w in workers.values()),
            slot_fallbacks=int(self.slots.get("slot_fallbacks", 0)),
            slot_waits=int(self.slots.get("slot_waits", 0)),
            slot_wait_s=self.slots.get("slot_wait_s", 0.0),
            slot_wait_max_s=self.slots.get("slot_wait_max_s", 0.0),
        )
        if reset:
            self._clear()
            self._recent.clear()
            self.dataset_base = dict(datasets)
        return out

    def _per_worker(self) -> tuple[dict[str, float], dict[int, WorkerStats]]:
        """Seconds per stage, summed over the workers (stages that took any), and each
        worker's figures."""
        stage_seconds = dict.fromkeys(STAGES, 0.0)
        workers: dict[int, WorkerStats] = {}
        for w in sorted(set(self.workers) | set(self._gauges)):
            worker = self.workers.get(w, _Worker())
            for stage, value in worker.seconds.items():
                stage_seconds[stage] = stage_seconds.get(stage, 0.0) + value
            gauges = self._gauges.get(w, {})
            workers[w] = WorkerStats(
                busy_s=worker.busy,
                utilisation=worker.busy / worker.wall if worker.wall > 0 else 0.0,
                rss=gauges.get("rss", 0),
                slots=gauges.get("slots", 0),
                slot_bytes=gauges.get("slot_bytes", 0),
            )
        return {s: v for s, v in stage_seconds.items() if v > 0}, workers

    def _storage(self) -> dict[str, float]:
        """The storage counters, with the read-ahead's hit rate where it was asked."""
        storage: dict[str, float] = dict(self.storage)
        hits = self.storage.get("read_ahead_hits", 0)
        misses = self.storage.get("read_ahead_misses", 0)
        if hits + misses:
            storage["read_ahead_hit_rate"] = hits / (hits + misses)
        return storage


def as_dict(stats: LoaderStats) -> dict[str, Any]:
    """Plain data (for JSON)."""
    return dataclasses.asdict(stats)
