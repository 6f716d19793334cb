"""A stream's runs: up to :data:`RUN` references of one dataset read and assembled in one call
(:meth:`PreparedRuns._prepare`), then taken from :class:`Prepared`, under the default
``encode_sample`` many at a time (:meth:`PreparedRuns._plain`), else one by one
(:meth:`PreparedRuns._prepared`).

A run ends at the first reference that fails to read or assemble; its failure is held
(:class:`_Failure`) and reported when the stream reaches that reference, with its file and
offset, as one by one. Local tar shards, JSONL lines of one file (``ShardReader.line_run``) and
columnar formats (token sequences of one mapped file, Parquet rows:
:mod:`stoker.runtime.column_runs`) each have their own read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stoker.pipeline.read import RawSample
from stoker.pipeline.refs import Position, Ref
from stoker.pipeline.refs import position as make_position
from stoker.pipeline.stage_clock import CLOCK, DECODE, READ
from stoker.runtime import column_pieces, worker_watch
from stoker.runtime.column_runs import column_run
from stoker.runtime.plain_runs import plain_outputs
from stoker.runtime.sample_encoding import SampleEncoding

#: References read and assembled at a time, in one call (see :meth:`PreparedRuns._prepare`).
RUN = 64
#: A block's references of one dataset: global sample indices, shards, indices in the shard.
BlockRefs = tuple[list[int], list[int], list[int]]


class Prepared:
    """One dataset's samples read and assembled ahead, taken from :attr:`at` on.

    The first :attr:`good` are samples; at most one more entry follows, for the reference
    that failed to read or assemble (its error, or None for a reference left unread).
    """

    __slots__ = ("at", "good", "raws", "samples")

    def __init__(self) -> None:
        self.samples: Sequence[Any] = []
        self.raws: Sequence[RawSample | None] = []
        self.at = 0
        self.good = 0

    def fill(self, samples: Sequence[Any], raws: Sequence[RawSample | None], good: int) -> None:
        """Hold ``samples`` (the first ``good`` assembled) and their raw samples."""
        self.samples, self.raws, self.at, self.good = samples, raws, 0, good

    def pop(self) -> tuple[RawSample | None, Any]:
        """The next entry's raw sample and sample (or failure)."""
        at = self.at
        self.at = at + 1
        return self.raws[at], self.samples[at]


class _Failure:
    """What :meth:`PreparedRuns._prepare` holds for a reference that failed to read or
    assemble: the error, reported when the stream reaches the reference."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class PreparedRuns(SampleEncoding):
    """Reads, assembles and encodes runs of references (a mixin of the stream)."""

    def _prepare(self, d: int, refs: BlockRefs, at: int, queue: Prepared) -> None:
        """Read and assemble the next run of dataset ``d``'s references of this block (from
        ``at``, up to :data:`RUN`) into ``queue``, up to the first that fails, which ends the
        run as a :class:`_Failure` (its raw sample or None)."""
        end = at + RUN
        # Stop before a shard that failed in this pass.
        shard_ids = self.health.readable(d, refs[1][at:end])
        if not shard_ids:  # the next is skipped unread (see _prepared)
            queue.fill([None], [None], 0)
            return
        end = at + len(shard_ids)
        io = self.io[d]
        clock = CLOCK
        clock.start(READ)
        try:
            # JSONL lines of one file, all read ahead: crude samples straight from their bytes
            lines = (
                io.reader.line_run(shard_ids, refs[2][at:end]) if io.builder.jsonl_crude else None
            )
            # Columnar formats (tokens of one mapped .bin, Parquet rows): crude samples from columns
            columns = (
                column_run(io.reader, io.builder, shard_ids, refs[2][at:end], refs[0][at:end])
                if io.columns and lines is None
                else None
            )
            if lines is not None:
                raws: Sequence[RawSample] = lines
                error: Exception | None = None
                clock.switch(DECODE)
                samples, failed = io.builder.assemble_lines(lines, refs[0][at:end])
            elif columns is not None:  # its samples made only if asked for (RunColumns)
                queue.fill(columns[1], columns[0], len(columns[1]))
                return
            else:
                read, error = io.reader.read_run(shard_ids, refs[2][at:end])
                raws = read
                clock.switch(DECODE)
                samples, failed = io.builder.assemble_run(read, refs[0][at:end])
        finally:
            clock.stop()
        _held(queue, samples, raws, failed, error)

    def _prepared(
        self, queue: Prepared, d: int, shard_id: int, index: int, calls: int
    ) -> Iterable[Any]:
        """The encoded outputs of the next reference of ``queue`` (as :meth:`_encode`)."""
        raw, sample = queue.pop()
        tracker = self.tracker
        worker_watch.at(d, shard_id, index)
        if (self.health.broken or worker_watch.skipped) and self.health.unread(
            self.spec.sources[d], d, shard_id, index, tracker
        ):
            return ()  # its shard failed after it was read ahead (or hung a worker): skipped
        if type(sample) is _Failure:
            self._failed(sample.error, tracker, d, shard_id, index, raw)
            return ()
        return self._finish(self.io[d], sample, raw, calls, tracker, d, shard_id, index)

    def _plain(
        self, queue: Prepared, n: int, d: int, refs: BlockRefs, at: int, counts: list[int],
        calls: int, out: Any,
    ) -> tuple[int, tuple[Position, Ref] | None]:  # fmt: skip
        """The outputs of the next ``n`` prepared samples of ``queue`` (references ``at`` ...
        of ``refs``) under the default ``encode_sample``, cooked and keyed, onto ``out``; adds
        the references used to ``counts[d]``. Returns how many were used (fewer than ``n`` after
        a failure) and the position and reference of the last output (None: none was made)."""
        slots = self.slots
        start = queue.at
        first, kitchen = calls * slots.step + slots.first % slots.step, self.io[d].builder.kitchen

        def failed(e: Exception, j: int) -> None:
            raw = queue.raws[start + j]
            self._failed(e, self.tracker, d, refs[1][at + j], refs[2][at + j], raw)

        done: int
        made: int | None
        if column_pieces.add_columns(out, queue, n, kitchen, first, slots.step, self.tracker):
            done, made = n, n - 1  # runs kept as columns (runtime/column_pieces.py)
        else:
            done, made = plain_outputs(
                queue.samples[start : start + n],
                kitchen,
                slots.first + slots.made * slots.step,
                first,
                slots.step,
                self.tracker,
                out,
                failed,
            )
        queue.at = start + done
        last = None
        if made is not None:
            made_counts = list(counts)
            made_counts[d] += made
            last = (make_position(tuple(made_counts), 1), (d, made_counts[d], 0))
        counts[d] += done
        return done, last


def _held(
    queue: Prepared,
    samples: list[Any],
    raws: Sequence[RawSample],
    failed: Exception | None,
    error: Exception | None,
) -> None:
    """Put a run's assembled ``samples`` into ``queue``, then its failure if any: ``failed``
    (assembling the raw sample after the last) or ``error`` (reading it: no raw sample)."""
    good = len(samples)
    kept: Sequence[RawSample | None] = raws
    if failed is not None:
        samples.append(_Failure(failed))
        kept = raws[: good + 1]
    elif error is not None:
        samples.append(_Failure(error))
        kept = [*raws[:good], None]
    queue.fill(samples, kept, good)


__all__ = ["RUN", "BlockRefs", "Prepared", "PreparedRuns"]
