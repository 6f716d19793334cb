"""``stoker bench``: load a dataset with the user's own settings at several worker counts.

:func:`run_bench` builds the training split of a dataset (folder, metadataset YAML or URL) with
the user's task encoder and decoder options, loads ``batches`` batches (or for ``seconds``) at each
worker count while a simulated training step sleeps ``consumer_ms`` per batch (the loop keeps
the last ``hold`` batches, as the user's may), and measures
samples/s, time to the first batch, the process tree's peak memory and the fraction of the loop's
time spent waiting in ``next()``. When the loader has ``stats()`` its bottleneck stage and
per-stage times are shown too. :func:`recommend` picks ``num_workers`` and ``prefetch_factor``.

Example:
    >>> report = run_bench(BenchSettings("coco-wds", workers=(0,), batch_size=4, batches=5))
    >>> report.recommendation.workers
    0
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Any

from stoker.preview.bench_measure import PeakRss, StatsView, batch_len, read_stats
from stoker.preview.bench_settings import BenchSettings, make_task_encoder

__all__ = ["BenchReport", "BenchRun", "BenchSettings", "Recommendation", "recommend", "run_bench"]

#: A setting whose loop waits for data less than this fraction of the time keeps up.
KEEPS_UP = 0.05
#: Without a training step, the fewest workers within this share of the best throughput win.
NEAR_BEST = 0.9


@dataclasses.dataclass(frozen=True)
class BenchRun:
    """The figures of one worker count. Times in seconds, memory in bytes."""

    workers: int
    batches: int
    samples: int
    seconds: float
    samples_per_s: float
    first_batch_s: float
    wait_frac: float
    peak_rss: int | None
    bottleneck: str | None
    stage_seconds: dict[str, float]
    skipped: int | None
    stats: dict[str, Any] | None
    #: Where the workers ran (``stoker bench --worker-types``; None: processes, the default).
    worker_type: str | None = None


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """The ``num_workers`` and ``prefetch_factor`` to use (None: not applicable), and why."""

    workers: int
    prefetch_factor: int | None
    reason: str


@dataclasses.dataclass(frozen=True)
class BenchReport:
    settings: BenchSettings
    runs: list[BenchRun]
    recommendation: Recommendation
    has_stats: bool


def run_bench(settings: BenchSettings) -> BenchReport:
    """Measure every worker count of ``settings`` in turn (each with a fresh loader)."""
    settings.check()
    runs = [
        _measure(settings, workers, worker_type)
        for worker_type in settings.worker_types
        for workers in settings.workers
    ]
    return BenchReport(
        settings,
        runs,
        recommend(runs, settings.consumer_ms),
        has_stats=any(run.stats is not None for run in runs),
    )


def _measure(settings: BenchSettings, workers: int, worker_type: str | None = None) -> BenchRun:
    from stoker.api import get_loader, get_train_dataset
    from stoker.model.worker_config import WorkerConfig

    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        settings.path,
        split_part=settings.split_part,
        worker_config=worker_config,
        batch_size=settings.batch_size,
        shuffle_buffer_size=settings.shuffle_buffer_size,
        max_samples_per_sequence=settings.max_samples_per_sequence,
        task_encoder=make_task_encoder(settings),
    )
    with PeakRss() as rss:
        start = time.perf_counter()
        loader = get_loader(
            dataset, prefetch_factor=settings.prefetch_factor, worker_type=worker_type
        )
        try:
            loop = _Loop(settings, iter(loader))
            loop.first(start, workers)
            loop.steady()
            view = read_stats(loader)
        finally:
            loop.kept.clear()
            loader.close()
    return dataclasses.replace(loop.result(workers, rss.peak, view), worker_type=worker_type)


class _Loop:
    """The simulated training loop: ``next()`` timed, then a step of ``consumer_ms``."""

    def __init__(self, settings: BenchSettings, batches: Any) -> None:
        self.settings = settings
        self.batches = batches
        self.default_len = settings.batch_size or 1
        self.first_batch_s = 0.0
        self.count = 0
        self.samples = 0
        self.waited = 0.0
        self.seconds = 0.0
        #: The batches the loop keeps (``settings.hold``), the newest last.
        self.kept: collections.deque[Any] = collections.deque(maxlen=settings.hold)

    def first(self, start: float, workers: int) -> None:
        """The first batch, timed; then one more from each other worker, untimed (warm-up).

        Workers take turns, so after these every worker has started and the steady phase
        measures loading, not process start-up.
        """
        batch = next(self.batches)
        self.first_batch_s = time.perf_counter() - start
        self._step(batch)
        for _ in range(workers - 1):
            self._step(next(self.batches))

    def steady(self) -> None:
        """Batches after the warm-up: ``settings.batches`` of them, or ``settings.seconds``."""
        limit, seconds = self.settings.batches, self.settings.seconds
        start = time.perf_counter()
        while True:
            elapsed = time.perf_counter() - start
            if (seconds is not None and elapsed >= seconds) or (
                seconds is None and self.count >= limit
            ):
                break
            before = time.perf_counter()
            try:
                batch = next(self.batches)
            except StopIteration:  # a split without repetition ran out
                break
            self.waited += time.perf_counter() - before
            self.count += 1
            self.samples += batch_len(batch, self.default_len)
            self._step(batch)
        self.seconds = time.perf_counter() - start

    def _step(self, batch: Any) -> None:
        self.kept.append(batch)
        if self.settings.consumer_ms > 0:
            time.sleep(self.settings.consumer_ms / 1000)

    def result(self, workers: int, peak_rss: int | None, view: StatsView | None) -> BenchRun:
        seconds = max(self.seconds, 1e-9)
        measured_wait = self.waited / seconds
        return BenchRun(
            workers=workers,
            batches=self.count,
            samples=self.samples,
            seconds=self.seconds,
            samples_per_s=self.samples / seconds,
            first_batch_s=self.first_batch_s,
            wait_frac=min(1.0, measured_wait),
            peak_rss=peak_rss,
            bottleneck=None if view is None else view.bottleneck,
            stage_seconds={} if view is None else view.stage_seconds,
            skipped=None if view is None else view.skipped,
            stats=None if view is None else view.raw,
        )


def recommend(runs: list[BenchRun], consumer_ms: float) -> Recommendation:
    """The fewest workers that keep up (or come near the best throughput), and a prefetch factor.

    With a training step (``consumer_ms > 0``) a setting keeps up when the loop waits for data
    less than 5 % of the time; without one, when it reaches 90 % of the best samples/s. A
    prefetch factor of 4 is advised where the chosen setting keeps up but still waits now and
    then (1 to 5 % of the time: bursts a deeper queue absorbs), 2 (the default) otherwise.

    Example:
        >>> def run(w, sps, wait):
        ...     return BenchRun(w, 10, 10, 1.0, sps, 0.1, wait, None, None, {}, None, None)
        >>> recommend([run(0, 100, .9), run(2, 190, .04), run(4, 200, .01)], 50).workers
        2
    """
    if not runs:
        raise ValueError("no bench runs to recommend from")
    best = max(runs, key=lambda r: r.samples_per_s)
    if consumer_ms > 0:
        keeping = [r for r in runs if r.wait_frac < KEEPS_UP]
        if not keeping:
            return _data_bound(runs, best)
        chosen = min(keeping, key=lambda r: r.workers)
        why = f"the training step waits {chosen.wait_frac:.0%} of the time"
    else:
        near = [r for r in runs if r.samples_per_s >= NEAR_BEST * best.samples_per_s]
        chosen = min(near, key=lambda r: r.workers)
        why = f"within {1 - NEAR_BEST:.0%} of the best ({best.samples_per_s:,.0f} samples/s)"
    return Recommendation(
        chosen.workers,
        _prefetch(chosen),
        f"{_workers(chosen.workers)}: {chosen.samples_per_s:,.0f} samples/s, {why}.",
    )


def _data_bound(runs: list[BenchRun], best: BenchRun) -> Recommendation:
    """No setting keeps up: the fewest workers within 5 % of the best, and what to try."""
    chosen = min(
        (r for r in runs if r.samples_per_s >= 0.95 * best.samples_per_s), key=lambda r: r.workers
    )
    fewest = min(runs, key=lambda r: r.workers)
    if len(runs) > 1 and best.samples_per_s < 1.1 * fewest.samples_per_s:
        advice = (
            f"more workers did not raise samples/s: the CPUs ({os.cpu_count()} here) or the "
            "storage are saturated; make a sample cheaper or find the slow stage"
        )
    else:
        advice = "try more workers, a cheaper decode, or find the slow stage"
    return Recommendation(
        chosen.workers,
        _prefetch(chosen),
        f"data-bound at every setting: with {_workers(chosen.workers)} the training step waits "
        f"{chosen.wait_frac:.0%} of the time ({chosen.samples_per_s:,.0f} samples/s); "
        f"{advice} (docs/observability.md).",
    )


def _workers(count: int) -> str:
    return f"{count} worker" + ("" if count == 1 else "s")


def _prefetch(run: BenchRun) -> int | None:
    if run.workers == 0:
        return None
    return 4 if KEEPS_UP / 5 < run.wait_frac < KEEPS_UP else 2
