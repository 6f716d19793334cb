"""Where a worker's time goes: seconds per pipeline stage, measured cheaply, sent as deltas.

Each process has one :data:`CLOCK`. A stage is timed with :meth:`StageClock.start` /
:meth:`StageClock.stop` around the call that does its work (``perf_counter`` twice); stages nest
and the time is *exclusive*: while ``decode`` runs inside ``read``'s caller, ``read`` does not
tick. The clock also counts the samples that went into batches (:meth:`StageClock.batched`).
:meth:`StageClock.delta` hands what accumulated since the last call (plain data) to be sent
with the next batch; the loader adds the deltas up in the main process
(:mod:`stoker.runtime.stats`).

Stage names: ``read`` (bytes from storage), ``decode``, ``cook``, ``encode_sample`` (the
per-sample hooks), ``pack``, ``group``, ``batch``, ``encode_batch``, ``transport`` (handing the
batch to the main process).

Example:
    >>> clock = StageClock()
    >>> clock.start(READ)
    >>> clock.start(DECODE)  # read's time pauses while decode runs
    >>> clock.stop()
    >>> clock.stop()
    >>> sorted(clock.delta().seconds)
    ['decode', 'read']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter

#: The stages in pipeline order (also the order stats print them in).
STAGES = (
    "read",
    "decode",
    "cook",
    "encode_sample",
    "pack",
    "group",
    "batch",
    "encode_batch",
    "transport",
)
READ, DECODE, COOK, ENCODE_SAMPLE, PACK, GROUP, BATCH, ENCODE_BATCH, TRANSPORT = range(9)


@dataclass
class StageDelta:
    """What one process measured since its previous delta (plain data, sent with a batch)."""

    #: Seconds per stage (exclusive).
    seconds: dict[str, float] = field(default_factory=dict)
    #: Seconds spent producing batches (all stages plus the glue between them).
    busy: float = 0.0
    #: Wall-clock seconds this delta covers.
    wall: float = 0.0
    #: Storage counters since the previous delta: requests, bytes, retries, read-ahead hits/misses.
    storage: dict[str, int] = field(default_factory=dict)
    #: Absolute gauges at the time of the delta: ``rss`` (bytes), ``slots`` / ``slot_bytes``
    #: (shared-memory batch slots the worker holds).
    gauges: dict[str, int] = field(default_factory=dict)
    #: Batch slot counters since the previous delta (``slot_fallbacks``, ``slot_waits``,
    #: ``slot_wait_s``) and ``slot_wait_max_s``, the longest wait so far.
    slots: dict[str, float] = field(default_factory=dict)
    #: Packing counters since the previous delta (:data:`stoker.pipeline.pack_stats.PACKING`).
    packing: dict[str, int] = field(default_factory=dict)


class StageClock:
    """Per-process stage timer (see the module docs); :attr:`enabled` False makes it a no-op.

    Stages are numbered (:data:`READ` ... :data:`TRANSPORT`, indices into :data:`STAGES`):
    a list index costs less than a dict lookup on this per-sample path.
    """

    def __init__(self) -> None:
        self.enabled = True
        self._acc: list[float] = []
        self.busy = 0.0
        self._stack: list[int] = []
        self._mark = 0.0
        self._since = 0.0
        self._samples = 0
        self.reset()

    def start(self, stage: int) -> None:
        """Enter ``stage`` (the enclosing stage pauses)."""
        if not self.enabled:
            return
        now = perf_counter()
        stack = self._stack
        if stack:
            self._acc[stack[-1]] += now - self._mark
        stack.append(stage)
        self._mark = now

    def stop(self) -> None:
        """Leave the innermost stage (the enclosing one resumes)."""
        if not self.enabled or not self._stack:
            return
        now = perf_counter()
        self._acc[self._stack.pop()] += now - self._mark
        self._mark = now

    def switch(self, stage: int) -> None:
        """Leave the innermost stage and enter ``stage`` (one clock read instead of two)."""
        if not self.enabled or not self._stack:
            return
        now = perf_counter()
        stack = self._stack
        self._acc[stack[-1]] += now - self._mark
        stack[-1] = stage
        self._mark = now

    def charge(self, stage: int, seconds: float) -> None:
        """Add ``seconds`` measured by the caller (``perf_counter`` before and after its work)
        to ``stage``, as :meth:`start` / :meth:`stop` around that work would (the enclosing
        stage, if any, does not tick for them): one call instead of two on a per-sample path.
        """
        if not self.enabled:
            return
        acc = self._acc
        acc[stage] += seconds
        if self._stack:
            acc[self._stack[-1]] -= seconds

    def batched(self, samples: int) -> None:
        """``samples`` went into the batch being made."""
        self._samples += samples

    def take_samples(self) -> int:
        """Samples batched since the last call."""
        taken, self._samples = self._samples, 0
        return taken

    @property
    def seconds(self) -> dict[str, float]:
        """Seconds per stage name since the last delta (stages that ran)."""
        return {name: t for name, t in zip(STAGES, self._acc, strict=True) if t > 0}

    def delta(self) -> StageDelta:
        """What accumulated since the last call (then cleared here)."""
        now = perf_counter()
        out = StageDelta(self.seconds, self.busy, now - self._since)
        self._acc = [0.0] * len(STAGES)
        self.busy, self._since = 0.0, now
        return out

    def reset(self) -> None:
        """Forget everything (a new worker or loader starts)."""
        self._acc = [0.0] * len(STAGES)
        self.busy = 0.0
        self._stack = []
        self._mark = 0.0
        self._since, self._samples = perf_counter(), 0


#: This process's clock.
CLOCK = StageClock()
