"""What a worker reports with its batches now and then: stage times, storage counters, memory.

A :class:`Meter` lives where the batches are made (a dataloader worker, or the training process
with ``num_workers=0``). :meth:`Meter.due` returns a
:class:`~stoker.pipeline.stage_clock.StageDelta` at most every ``every`` seconds (and always at
the end of a worker's streams), so most envelopes carry nothing extra and the cost stays a few
``perf_counter`` calls per sample. The first :data:`EAGER` items each carry one, so that a short
run has stage times too.

Example:
    >>> meter = Meter(enabled=True, every=0.0)
    >>> delta = meter.due()
    >>> delta is not None and "rss" in delta.gauges
    True
"""

from __future__ import annotations

import os
from time import perf_counter
from typing import Any

from stoker.pipeline.pack_stats import PACKING
from stoker.pipeline.read_ahead import TAKEN
from stoker.pipeline.stage_clock import CLOCK, StageDelta
from stoker.storage.retry import RETRIED
from stoker.storage.s3_client import STATS

#: Seconds between two deltas of one worker.
EVERY = 0.25
#: The first items of a worker each carry a delta (a short run has stage times at once).
EAGER = 4


def _storage() -> dict[str, int]:
    return {
        "requests": STATS.total_requests,
        "bytes": STATS.bytes_received,
        "retries": RETRIED["retries"],
        "read_ahead_hits": TAKEN["hits"],
        "read_ahead_misses": TAKEN["misses"],
    }


def rss() -> int:
    """This process's resident memory in bytes: from /proc (cheap, no import), else psutil
    where installed (macOS), else 0."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return 0
    return int(psutil.Process().memory_info().rss)


class Meter:
    """Hands out this process's measurements as deltas (see the module docs)."""

    def __init__(self, *, enabled: bool, transport: Any = None, every: float = EVERY) -> None:
        self.enabled, self.transport, self.every = enabled, transport, every
        CLOCK.enabled = enabled
        CLOCK.reset()
        self._storage = _storage()
        self._packing = dict(PACKING)
        self._slots: dict[str, float] = {}
        self._last = perf_counter()
        self._sent = 0

    def due(self, *, final: bool = False) -> StageDelta | None:
        """A delta if one is due (or ``final``), else None."""
        if not self.enabled:
            return None
        now = perf_counter()
        self._sent += 1
        if not final and self._sent > EAGER and now - self._last < self.every:
            return None
        self._last = now
        delta = CLOCK.delta()
        current = _storage()
        delta.storage = {
            k: v - self._storage[k] for k, v in current.items() if v != self._storage[k]
        }
        self._storage = current
        delta.packing = {
            k: v - self._packing.get(k, 0)
            for k, v in PACKING.items()
            if v != self._packing.get(k, 0)
        }
        self._packing = dict(PACKING)
        delta.gauges = {"rss": rss()}
        gauges = getattr(self.transport, "slot_gauges", None)
        if gauges is not None:
            delta.gauges["slots"], delta.gauges["slot_bytes"] = gauges()
        counters: dict[str, float] = getattr(self.transport, "counters", {})
        delta.slots = _changed(counters, self._slots)
        self._slots = dict(counters)
        return delta


def _changed(counters: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """The slot counters that changed since ``before``, by how much; a ``*_max_s`` maximum is
    sent as it is and starts again at 0 (so each delta carries the longest since the last)."""
    out = {}
    for name, value in counters.items():
        if name.endswith("_max_s"):
            if value:
                out[name], counters[name] = value, 0.0
        elif value != before.get(name, 0):
            out[name] = value - before.get(name, 0)
    return out
