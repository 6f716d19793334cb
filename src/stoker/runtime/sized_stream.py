"""A stream of a blend by size: one reference at a time, each chosen after the last one's size.

In a sized blend (:mod:`stoker.plan.sized_blend`) the next dataset depends on the sizes of the
samples already taken, which are known only once a sample is read and cooked. So this stream
takes one reference at a time: it asks the schedule for the next dataset from its counts and size
totals, reads and cooks that sample, adds ``blend_sample_size`` of it to the dataset's total, and
runs the per-sample hooks. Each dataset's next references are located (and prefetched) ahead in
windows, since each dataset's own order does not depend on the blend.

Its position is ``(counts, size totals)`` then ``skip``: the totals count the samples before
``counts``, so a restore that re-reads a sample whose outputs were split measures it again.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from stoker.model.task import ErrorTracker, blend_sizer
from stoker.pipeline.refs import Position, Ref
from stoker.runtime.stream import SampleStream
from stoker.runtime.stream_spec import SourceIO, StreamSpec

#: References of one dataset located (and prefetched) at a time.
_AHEAD = 256


class SizedSampleStream(SampleStream):
    """:class:`SampleStream` for a sized blend (see the module docstring)."""

    def __init__(
        self,
        spec: StreamSpec,
        io: Sequence[SourceIO],
        tracker: ErrorTracker,
        start: Position | None,
        epoch: int,
    ) -> None:
        super().__init__(spec, io, tracker, start, epoch)
        self.sizer = blend_sizer(spec.task_encoder)
        if start is None:
            zeros = (0,) * len(spec.sources)
            self.first = Position((*spec.schedule.start(epoch), *zeros))
            self.start = self.position = self.first

    def _chunks(self) -> Generator[tuple[list[Any], Position, Ref], int, None]:
        """Encoded samples in lists of the length sent in, as :meth:`SampleStream._chunks`."""
        n = len(self.spec.sources)
        schedule = self.spec.schedule
        values = list(self.start.counts)
        counts, totals, skip = values[:n], values[n:], self.start.skip
        calls = sum(counts)
        #: Per dataset: the first count of its located window, and its references there.
        windows: dict[int, tuple[int, list[int], list[int], list[int]]] = {}
        out: list[Any] = []
        last: tuple[Position, Ref] | None = None
        want: int = yield  # type: ignore[misc]  # primed by Runs / _run
        while True:
            picked = schedule.next_block([*counts, *totals], schedule.end(counts, self.epoch), 1)
            if len(picked) == 0:
                break
            d = int(picked[0])
            c = counts[d]
            lo, refs, shard_ids, indices = windows.get(d) or (c, [], [], [])
            if not lo <= c < lo + len(refs):
                lo, window = c, schedule.refs(d, c, c + _AHEAD)
                located = self._locate(d, window)
                refs, shard_ids, indices = window.tolist(), *(a.tolist() for a in located)
                windows[d] = (lo, refs, shard_ids, indices)
            at = c - lo
            self.size = 0  # a sample that fails before it is measured adds nothing
            outputs = self._encode(d, shard_ids[at], indices[at], refs[at], calls)
            for used, output in enumerate(outputs, start=1):
                if used > skip:
                    out.append(output)
                    last = (Position((*counts, *totals), used), (d, c, used - 1))
                    if len(out) >= want:
                        self.position = last[0]
                        want = yield out, last[0], last[1]
                        out = []
            skip = 0
            totals[d] += self.size
            counts[d] += 1
            calls += 1
        if out and last is not None:
            self.position = last[0]
            yield out, last[0], last[1]
