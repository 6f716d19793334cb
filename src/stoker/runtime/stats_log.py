"""``get_loader(..., log_stats_every=60)``: one compact line per interval on the ``stoker`` logger.

Checked in the training process each time the loop takes a batch (no thread, no extra message):
when ``every`` seconds have passed since the last line, :class:`StatsLog` logs the figures of
that interval, worked out from two :meth:`Loader.stats` snapshots (so the user's own
``stats(reset=True)`` calls are not disturbed), e.g.::

    stoker: 1,234 samples/s (74,040 samples), waited 31% of the last 60 s,
        bottleneck decode (62%), skipped 3 (decode: OSError 3)

(on one line).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter

from stoker.errors import ConfigError
from stoker.runtime.stats_view import LoaderStats

LOG = logging.getLogger("stoker")


def check_every(every: float | None) -> float | None:
    """``every`` if it is None or a positive number of seconds, else a :class:`ConfigError`."""
    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, (int, float)) or every <= 0:
        raise ConfigError(
            f"log_stats_every={every!r} must be a positive number of seconds or None.",
            hint="E.g. get_loader(ds, log_stats_every=60) logs one line a minute; None: off.",
        )
    return float(every)


class StatsLog:
    """Logs one line per ``every`` seconds from the snapshots ``stats`` gives.

    Example:
        >>> log = StatsLog(60.0, loader.stats)
        >>> for batch in loader:
        ...     log.tick()  # after each batch handed out: logs once a minute
    """

    def __init__(self, every: float, stats: Callable[[], LoaderStats]) -> None:
        self.every = every
        self._stats = stats
        self._last_time = perf_counter()
        self._last: LoaderStats | None = None

    def tick(self) -> None:
        """Log a line if ``every`` seconds have passed since the last one."""
        now = perf_counter()
        if now - self._last_time < self.every:
            return
        current = self._stats()
        if LOG.isEnabledFor(logging.INFO):
            LOG.info("%s", interval_line(self._last, current, now - self._last_time))
        self._last, self._last_time = current, now


def interval_line(before: LoaderStats | None, now: LoaderStats, elapsed: float) -> str:
    """The figures between two snapshots as one line (``before`` None: since the start).

    Example:
        >>> interval_line(None, LoaderStats(samples=120, seconds=2.0, data_wait_s=0.5), 2.0)
        'stoker: 60 samples/s (120 samples), waited 25% of the last 2 s'
    """
    if before is None or now.samples < before.samples or now.seconds < before.seconds:
        before = LoaderStats()  # the first line, or the user reset the figures meanwhile
    samples = now.samples - before.samples
    span = max(now.seconds - before.seconds, 1e-9)
    wait = max(now.data_wait_s - before.data_wait_s, 0.0)
    parts = [
        f"stoker: {samples / span:,.0f} samples/s ({samples:,} samples)",
        f"waited {min(wait / span, 1.0):.0%} of the last {elapsed:.3g} s",
    ]
    stages = {
        s: v - before.stage_seconds.get(s, 0.0)
        for s, v in now.stage_seconds.items()
        if v - before.stage_seconds.get(s, 0.0) > 0
    }
    if stages:
        top = max(stages, key=lambda s: stages[s])
        parts.append(f"bottleneck {top} ({stages[top] / sum(stages.values()):.0%})")
    skips = {
        r: n - before.skipped.get(r, 0)
        for r, n in now.skipped.items()
        if n - before.skipped.get(r, 0) > 0
    }
    if skips:
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(skips.items(), key=lambda x: -x[1])[:3])
        parts.append(f"skipped {sum(skips.values())} ({reasons})")
    return ", ".join(parts)
