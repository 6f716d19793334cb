"""Progress of long jobs (prepare, pack, lint, probes): a bar on a terminal, plain lines in logs.

Where stderr is not a terminal (a cluster job's log file), progress is a line every
``STOKER_PROGRESS_INTERVAL`` seconds (default 30) with the rank, counts, rate and ETA, and never
a carriage return or escape code.

:class:`Progress`, a context manager, counts done items (shards, files, samples; with a rank
label under ``--distributed``); :func:`track` wraps an iterable in one; :func:`silent_step`
brackets a long step that cannot count (a line when it starts, one when it ends).

Example:
    >>> with Progress(10, "Indexing shards", enabled=False) as bar:
    ...     bar.update(samples=100)
    >>> list(track("ab", desc="Joining", unit="join", enabled=False))
    ['a', 'b']
    >>> with silent_step("Sorting the index", enabled=False):
    ...     pass
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tqdm import tqdm

from stoker.format.distributed import World, rank_label
from stoker.storage.options import PROGRESS_INTERVAL_ENV, env_seconds

T = TypeVar("T")

#: Seconds between plain progress lines when the output is not a terminal.
DEFAULT_INTERVAL_S = 30.0


class Progress:
    """Counts done items of ``total`` (``None``: unknown); shows them as a bar or as log lines."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        *,
        world: World | None = None,
        enabled: bool = True,
        unit: str = "shard",
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.label = rank_label(world)
        self.done = 0
        self.samples = 0
        self.enabled = enabled
        self._start = self._last = time.monotonic()
        self._interval = env_seconds(PROGRESS_INTERVAL_ENV, DEFAULT_INTERVAL_S)
        self._bar: tqdm[Any] | None = None
        if enabled and sys.stderr.isatty():
            self._bar = tqdm(total=total, desc=f"{self.label}{desc}", unit=unit, dynamic_ncols=True)

    def update(self, n: int = 1, samples: int = 0) -> None:
        self.done += n
        self.samples += samples
        if self._bar is not None:
            self._bar.update(n)
            if self.samples:
                self._bar.set_postfix(samples=self.samples, refresh=False)
        elif self.enabled and time.monotonic() - self._last >= self._interval:
            self._last = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        """``rank 1/4: Indexing shards: 120/400 (30%), 11.2 shard/s, ETA 25s``."""
        elapsed = max(time.monotonic() - self._start, 1e-9)
        rate = self.done / elapsed
        samples = f", {self.samples} samples" if self.samples else ""
        if self.total is None:
            return f"{self.label}{self.desc}: {self.done}{samples}, {rate:.1f} {self.unit}/s"
        left = (self.total - self.done) / rate if rate else float("inf")
        pct = 100 * self.done // max(self.total, 1)
        return (
            f"{self.label}{self.desc}: {self.done}/{self.total} ({pct}%){samples}, "
            f"{rate:.1f} {self.unit}/s, ETA {format_seconds(left)}"
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the bar, or print the last line with the time taken (once)."""
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            elapsed = time.monotonic() - self._start
            print(f"{self.line()} - done in {format_seconds(elapsed)}", file=sys.stderr, flush=True)
            self.enabled = False  # closed: a second close prints nothing


def track(
    items: Iterable[T], *, desc: str, unit: str, total: int | None = None, enabled: bool = True
) -> Iterator[T]:
    """Yields ``items``, counting each in a :class:`Progress` (``total``: ``len(items)`` if any)."""
    if total is None and isinstance(items, Sequence):
        total = len(items)
    with Progress(total, desc, unit=unit, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.update()


@contextmanager
def silent_step(desc: str, enabled: bool) -> Iterator[None]:
    """Plain lines around a long step that reports no progress (e.g. the index sorts of a large
    prepare, ~30 minutes at 10^9 samples): when it started, and when it ended."""
    start = time.monotonic()
    if enabled:
        print(desc, file=sys.stderr, flush=True)
    yield
    if enabled:
        took = format_seconds(time.monotonic() - start)
        print(f"{desc.partition(' (')[0]} - done in {took}", file=sys.stderr, flush=True)


class StepClock:
    """Adds up the seconds of ``with clock(step)`` blocks (and of waits for ``timed`` items)."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self._step = ""
        self._start = 0.0

    def __call__(self, step: str) -> StepClock:
        self._step = step
        return self

    def __enter__(self) -> None:
        self._start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self._step] += time.perf_counter() - self._start

    def timed(self, step: str, items: Iterator[T]) -> Iterator[T]:
        """Yields ``items``, adding the time spent waiting for each to ``step``."""
        while True:
            start = time.perf_counter()
            item = next(items, None)
            self.seconds[step] += time.perf_counter() - start
            if item is None:
                return
            yield item


def summary_line(per_rank: Sequence[tuple[int, int, float]], total_shards: int) -> str:
    """One line for all ranks from each rank's (shards, samples, seconds)."""
    shards = sum(s for s, _, _ in per_rank)
    samples = sum(n for _, n, _ in per_rank)
    slowest = max(range(len(per_rank)), key=lambda r: per_rank[r][2])
    fastest = min(t for _, _, t in per_rank)
    return (
        f"all {len(per_rank)} ranks: {shards}/{total_shards} shards, {samples} samples; "
        f"slowest rank {slowest} took {format_seconds(per_rank[slowest][2])}, fastest "
        f"{format_seconds(fastest)}"
    )


def format_seconds(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``; ``?`` when unknown."""
    if seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
