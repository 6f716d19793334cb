"""One stream (virtual worker): scheduled references -> read -> decode -> sample -> encode -> batch.

A stream's position is ``(counts, skip)``: ``counts[d]`` references were taken from dataset ``d``
(its position in that dataset's stream plan), and the first ``skip`` outputs of the next
reference's ``encode_sample`` were already used. Every batch carries the position after it, so
saving state costs nothing and restoring re-reads at most the one sample whose outputs were split
between two batches.

Content-dependent stages (packing, grouping) hold samples across batches. Each sample has a
*reference* ``(dataset, count, output)``: the ``output``-th result of ``encode_sample`` on the
reference at position ``count`` of that dataset's stream. The stages save the references they hold
next to the position, and a restored stage re-reads only those (:meth:`SampleStream.reread`).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import StokerError
from stoker.model.task import (
    DefaultTaskEncoder,
    ErrorTracker,
    TaskEncoder,
    iter_encoded,
    sample_hooks,
)
from stoker.pipeline import hook_index
from stoker.pipeline.batching import BatchMaker, FixedBatcher, restore_key_of
from stoker.pipeline.errors import ErrorPolicy, SkipSample, scope_of
from stoker.pipeline.group import Grouper
from stoker.pipeline.hook_index import BatchSlots
from stoker.pipeline.hooks import NO_OUTPUT, call_hook, hook_items
from stoker.pipeline.node import Node, NodeState
from stoker.pipeline.pack import Packer
from stoker.pipeline.pack_groups import PackingGroups
from stoker.pipeline.read import RawSample, ShardReader
from stoker.pipeline.refs import Buffers, Position, Ref, RefSource, Runs, pick
from stoker.pipeline.refs import position as make_position
from stoker.pipeline.schedule import StreamSchedule
from stoker.pipeline.skips import REST_OF_SHARD, STORAGE
from stoker.pipeline.stage_clock import CLOCK, DECODE, ENCODE_SAMPLE, READ
from stoker.plan import global_to_shard
from stoker.plan.sized_blend import size_units
from stoker.runtime import token_batches, worker_watch
from stoker.runtime.build import SampleBuilder
from stoker.runtime.plain_runs import Prepared, plain_outputs, same_runs
from stoker.runtime.token_runs import applies as token_runs_apply
from stoker.runtime.token_runs import token_run
from stoker.sources.source import DataSource

#: References planned (and prefetched) at a time: small for the first block, so the first batch
#: comes soon; larger after, so remote reads coalesce over whole shard slices (fewer requests).
_FIRST_BLOCK, _BLOCK = 1024, 4096
#: A block's references of one dataset: global sample indices, shards, indices in the shard.
_Refs = tuple[list[int], list[int], list[int]]
#: References read and assembled at a time, in one call (see :meth:`SampleStream._prepare`).
_RUN = 64
#: Whether samples are read, assembled and encoded in runs, and batched from lists
#: (:meth:`SampleStream.runs`); False: one by one (what tests compare with).
RUNS = True


@dataclass
class StreamSpec:
    """Everything a worker needs to run one stream (picklable)."""

    sources: list[DataSource]
    schedule: StreamSchedule
    task_encoder: TaskEncoder[Any, Any, Any, Any]
    batch_size: int | None
    drop_last: bool
    packing_buffer_size: int | None = None
    group_batches: bool = False
    #: Datasets packed in buffers of their own group (None: one buffer for all).
    packing_groups: PackingGroups | None = None


@dataclass
class SourceIO:
    """A worker's reader and sample builder for one data source."""

    reader: ShardReader
    builder: SampleBuilder

    def __post_init__(self) -> None:
        #: Whether runs of token sequences are built from columns (:mod:`.token_runs`).
        self.tokens = token_runs_apply(self.builder)


class SampleStream(RefSource):
    """Encoded samples of one stream, each with the position after it and its reference (the
    leaf node of a stream's chain; its state is ``{"stream": position}``)."""

    name = "stream"

    def __init__(
        self,
        spec: StreamSpec,
        io: Sequence[SourceIO],
        tracker: ErrorTracker,
        start: Position | None,
        epoch: int,
    ) -> None:
        super().__init__()
        self._runs: Runs | None = None
        self.spec, self.io, self.tracker = spec, io, tracker
        self.epoch = epoch
        #: Where the stream starts when reset without a state of its own.
        self.first = start or Position(tuple(spec.schedule.start(epoch)))
        self.start = self.position = self.first
        #: Where this stream's batches fall on the rank (for the hooks' batch/sample indices).
        self.slots = BatchSlots()
        self.hooks = sample_hooks(spec.task_encoder, packing=spec.packing_buffer_size is not None)
        #: The one per-sample hook, called directly (None: a chain of hooks).
        self.direct_hook = direct_hook(spec.task_encoder, self.hooks)
        #: (dataset, shard) found damaged in this pass (a :class:`CorruptShardError` that was
        #: skipped): the rest of its samples are skipped unread, each counted.
        self.corrupt: set[tuple[int, int]] = set()
        #: (dataset, shard) whose read spent its retry budget in this pass: the storage did not
        #: answer for that long, so the rest of its samples are skipped unread, each counted.
        self.unreachable: set[tuple[int, int]] = set()
        #: A sized blend's ``blend_sample_size`` (else None) and the size of the last sample it
        #: measured (:class:`~stoker.runtime.sized_stream.SizedSampleStream`).
        self.sizer: Any = None
        self.size = 0
        #: Whether a fixed-size batcher takes the samples (runs of token samples as columns).
        self._columnar = False

    def state(self) -> NodeState:
        """``{"stream": position after the last sample handed out}``."""
        return {self.name: self.position}

    def _reset(self, state: NodeState) -> None:
        saved = state.get(self.name)
        self.start = self.position = self.first if saved is None else saved

    def _run(self) -> Iterator[tuple[Any, Position, Ref]]:
        """Encoded samples with the position after each and its reference."""
        chunks = self._chunks()
        next(chunks)
        send = chunks.send
        while True:
            try:
                outputs, position, ref = send(1)
            except StopIteration:
                return
            yield outputs[0], position, ref

    def runs(self) -> Runs | None:
        if not RUNS:
            return None
        runs = self._runs
        if runs is None:
            if not self._ready:
                self.reset()
            self._columnar = True
            runs = self._runs = Runs(self._chunks())
        return runs

    def _close_items(self) -> None:
        super()._close_items()
        runs, self._runs = self._runs, None
        if runs is not None:
            runs.close()

    def _chunks(self) -> Generator[tuple[list[Any], Position, Ref], int, None]:
        """Encoded samples in lists of the length sent in (fewer only at the end), with the
        position after the last of each list and its reference (see :class:`Runs`).

        Runs of one dataset's references are read and assembled ahead (:meth:`_prepare`);
        under the default ``encode_sample`` they are cooked and keyed in one loop
        (:func:`plain_outputs`), never past the list being filled, so each hook sees the batch
        index of the batch its sample goes into. Other references go one by one.
        """
        counts, skip = list(self.start.counts), self.start.skip
        calls = sum(counts)  # the stream's encode_sample calls so far (sum of the counts)
        block = self._next_block(counts, _FIRST_BLOCK)
        encode, prepare, prepared = self._encode, self._prepare, self._prepared
        # Datasets whose samples are read and assembled in runs (no user code before cooking;
        # remote runs take only what the read-ahead has received, see ShardReader.read_run).
        bulk = [RUNS and io.builder.bulk for io in self.io]
        # Per dataset: the samples read and assembled ahead.
        queues = [Prepared() for _ in counts]
        # The default encode_sample: each sample is its one output (plain_outputs).
        identity = self.direct_hook is _IDENTITY
        columnar = self._columnar and token_batches.applies(self, identity)
        new_out = token_batches.collector(columnar)  # a list, or token runs as columns
        out: Any = new_out()
        last: tuple[Position, Ref] | None = None
        want: int = yield  # type: ignore[misc]  # primed by Runs / _run
        while block is not None:
            choices, refs = block
            # Locate (and so prefetch) the next block before reading this one: its reads overlap.
            after = np.add(counts, np.bincount(choices, minlength=len(counts))).tolist()
            block = self._next_block(after, _BLOCK)
            taken = [0] * len(counts)
            for d, length in same_runs(choices):
                mine = refs[d]
                stop = taken[d] + length
                while taken[d] < stop:
                    at = taken[d]
                    queue = queues[d]
                    if bulk[d] and queue.at == len(queue.samples):
                        prepare(d, mine, at, queue)
                    if (
                        identity
                        and not skip
                        and queue.at < queue.good
                        and not self.corrupt
                        and not self.unreachable
                    ):
                        n = min(stop - at, want - len(out), queue.good - queue.at)
                        done, made = self._plain(queue, n, d, mine, at, counts[d], calls, out)
                        if made is not None:
                            made_counts = list(counts)
                            made_counts[d] = made
                            last = (make_position(tuple(made_counts), 1), (d, made, 0))
                        taken[d] += done
                        counts[d] += done
                        calls += done
                    else:
                        ref, shard_id, index = mine[0][at], mine[1][at], mine[2][at]
                        if bulk[d]:
                            raw, sample = queue.pop()
                            outputs = prepared(raw, sample, d, shard_id, index, calls)
                        else:
                            outputs = encode(d, shard_id, index, ref, calls)
                        taken[d] += 1
                        for used, output in enumerate(outputs, start=1):
                            if used > skip:
                                out.append(output)
                                last = (
                                    make_position(tuple(counts), used),
                                    (d, counts[d], used - 1),
                                )
                                if len(out) >= want:
                                    self.position = last[0]
                                    want = yield out, last[0], last[1]
                                    out = new_out()
                        skip = 0
                        counts[d] += 1
                        calls += 1
                        continue
                    if len(out) >= want and last is not None:
                        self.position = last[0]
                        want = yield out, last[0], last[1]
                        out = new_out()
        if out and last is not None:
            self.position = last[0]
            yield out, last[0], last[1]

    def _plain(
        self,
        queue: Prepared,
        n: int,
        d: int,
        refs: _Refs,
        at: int,
        count: int,
        calls: int,
        out: Any,
    ) -> tuple[int, int | None]:
        """The outputs of the next ``n`` prepared samples of ``queue`` (references ``at`` ...
        of ``refs``, counts ``count`` ...) under the default ``encode_sample``, cooked and keyed,
        onto ``out``: how many references were used (fewer than ``n`` after a failure) and the
        count of the last that gave an output (None: none did)."""
        slots = self.slots
        start = queue.at
        first, kitchen = calls * slots.step + slots.first % slots.step, self.io[d].builder.kitchen
        if token_batches.add_columns(out, queue, n, kitchen, first, slots.step, self.tracker):
            return n, count + n - 1

        def failed(e: Exception, j: int) -> None:
            raw = queue.raws[start + j]
            self._failed(e, self.tracker, d, refs[1][at + j], refs[2][at + j], raw)

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
        return done, None if made is None else count + made

    def _next_block(
        self, counts: list[int], size: int
    ) -> tuple[np.ndarray, dict[int, _Refs]] | None:
        """The dataset ids of the ``size`` references from ``counts`` and their references
        (prefetched)."""
        schedule = self.spec.schedule
        choices = schedule.next_block(counts, schedule.end(counts, self.epoch), size)
        return None if len(choices) == 0 else (choices, self._block_refs(counts, choices))

    def _block_refs(self, counts: list[int], choices: np.ndarray) -> dict[int, _Refs]:
        """The global indices, shards and indices in the shard of each dataset's next references
        in this block (three lists); prefetched."""
        out: dict[int, _Refs] = {}
        for d, n in enumerate(np.bincount(choices, minlength=len(counts)).tolist()):
            if n == 0:
                continue
            refs = self.spec.schedule.refs(d, counts[d], counts[d] + n)
            shard_ids, indices = self._locate(d, refs)
            out[d] = (refs.tolist(), shard_ids.tolist(), indices.tolist())
        return out

    def _locate(self, d: int, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(shard, index in shard) of global samples ``refs`` of dataset ``d``; prefetched."""
        source = self.spec.sources[d]
        shard_ids, indices = global_to_shard(source.counts, refs)
        if source.first_index is not None:  # a subset: shards may start mid-way
            indices = indices + source.first_index[shard_ids]
        try:
            self.io[d].reader.prefetch(shard_ids, indices)
        except StokerError as e:  # only a hint: each read meets (and reports) the failure
            if e.scope == "config":
                raise
        return shard_ids, indices

    def reread(self, refs: Sequence[Ref]) -> list[Any]:
        """The encoded samples at ``refs`` (``(dataset, count, output)``), read again.

        Each referenced sample is read and encoded once, however many of its outputs are wanted;
        a failure raises (the sample went through before, so the data or a hook changed).
        """
        wanted = sorted({(d, c) for d, c, _ in refs})
        outputs: dict[tuple[int, int], list[Any]] = {}
        strict = ErrorTracker(ErrorPolicy(mode="raise"))
        for d in sorted({d for d, _ in wanted}):
            counts = np.array([c for dd, c in wanted if dd == d], dtype=np.int64)
            global_refs = self._refs_at(d, counts)
            shard_ids, indices = self._locate(d, global_refs)
            for c, ref, shard_id, index in zip(
                counts.tolist(), global_refs.tolist(), shard_ids.tolist(), indices.tolist(),
                strict=True,
            ):  # fmt: skip
                # The call number is exact for one dataset; for blends it is the dataset's own.
                outputs[(d, c)] = list(self._encode(d, shard_id, index, ref, c, strict))
        return [
            pick(outputs[(d, c)], j, f"encode_sample of dataset {d} at {c}") for d, c, j in refs
        ]

    def where(self, ref: Ref) -> str:
        d, count = ref[0], ref[1]
        index = int(self.spec.schedule.refs(d, count, count + 1)[0])
        return f"{self.spec.sources[d].path}, sample #{index} of the split"

    def _refs_at(self, d: int, counts: np.ndarray) -> np.ndarray:
        """Global sample indices of ``dataset`` at the (sorted) stream positions ``counts``."""
        lo, hi = int(counts[0]), int(counts[-1]) + 1
        if hi - lo <= 8 * len(counts) + _BLOCK:  # near each other: one plan lookup
            window = self.spec.schedule.refs(d, lo, hi)
            return np.asarray(window[counts - lo], dtype=np.int64)
        parts = [self.spec.schedule.refs(d, c, c + 1) for c in counts.tolist()]
        return np.concatenate(parts)

    def _encode(
        self,
        d: int,
        shard_id: int,
        index: int,
        ref: int,
        calls: int,
        tracker: ErrorTracker | None = None,
    ) -> Iterable[Any]:
        """The encoded outputs of one reference, the stream's ``calls``-th.

        A hook that returns one output is run here (the outputs come as a tuple); a generator
        hook's outputs are made as they are taken (it runs on as its outputs are batched), each
        with the hook indices of the batch being built then, as in Energon.
        """
        tracker = tracker or self.tracker
        worker_watch.at(d, shard_id, index)
        if (self.corrupt or self.unreachable or worker_watch.skipped) and self._unread(
            d, shard_id, index, tracker
        ):
            return ()
        io = self.io[d]
        raw: RawSample | None = None
        clock = CLOCK
        # The hook indices are set where user code runs on the sample (here a sample loader,
        # part filter or joiner; the cookers and hooks in _finish).
        indexed = io.builder.user_code
        try:
            if indexed:
                hook_index.push(self.slots.batch_index(), self.slots.sample_index(calls))
            try:
                clock.start(READ)
                try:
                    raw = io.reader.read(shard_id, index)
                    clock.switch(DECODE)
                    sample = io.builder.assemble(raw, ref)
                finally:
                    clock.stop()
            finally:
                if indexed:
                    hook_index.pop()
        except Exception as e:
            self._failed(e, tracker, d, shard_id, index, raw)
            return ()
        return self._finish(io, sample, raw, calls, tracker, d, shard_id, index)

    def _prepare(self, d: int, refs: _Refs, at: int, queue: Prepared) -> None:
        """Read and assemble the next run of dataset ``d``'s references of this block (from
        ``at``, up to :data:`_RUN`) into ``queue``, up to the first that fails, which ends the
        run as a :class:`_Failure` (its raw sample or None)."""
        end = at + _RUN
        shard_ids = refs[1][at:end]
        if self.corrupt or self.unreachable:  # stop before a shard that failed in this pass
            broken = self.corrupt | self.unreachable
            shard_ids = list(itertools.takewhile(lambda s: (d, s) not in broken, shard_ids))
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
            # Token sequences of one mapped .bin: crude samples built from columns
            tokens = (
                token_run(io.reader, io.builder, shard_ids, refs[2][at:end], refs[0][at:end])
                if io.tokens
                else None
            )
            if lines is not None:
                raws: Sequence[RawSample] = lines
                error: Exception | None = None
                clock.switch(DECODE)
                samples, failed = io.builder.assemble_lines(lines, refs[0][at:end])
            elif tokens is not None:  # its samples made only if asked for (TokenColumns)
                queue.fill(tokens[1], tokens[0], len(tokens[1]))
                return
            else:
                read, error = io.reader.read_run(shard_ids, refs[2][at:end])
                raws = read
                clock.switch(DECODE)
                samples, failed = io.builder.assemble_run(read, refs[0][at:end])
        finally:
            clock.stop()
        good = len(samples)
        kept: Sequence[RawSample | None] = raws
        if failed is not None:
            samples.append(_Failure(failed))
            kept = raws[: good + 1]
        elif error is not None:
            samples.append(_Failure(error))
            kept = [*raws[:good], None]
        queue.fill(samples, kept, good)

    def _prepared(
        self, raw: RawSample | None, sample: Any, d: int, shard_id: int, index: int, calls: int
    ) -> Iterable[Any]:
        """The encoded outputs of a reference :meth:`_prepare` read (as :meth:`_encode`)."""
        tracker = self.tracker
        worker_watch.at(d, shard_id, index)
        if (self.corrupt or self.unreachable or worker_watch.skipped) and self._unread(
            d, shard_id, index, tracker
        ):
            return ()  # its shard failed after it was read ahead (or hung a worker): skipped
        if type(sample) is _Failure:
            self._failed(sample.error, tracker, d, shard_id, index, raw)
            return ()
        return self._finish(self.io[d], sample, raw, calls, tracker, d, shard_id, index)

    def _unread(self, d: int, shard_id: int, index: int, tracker: ErrorTracker) -> bool:
        """Whether the reference's shard failed earlier in this pass (then it is counted as
        skipped, unread)."""
        source = self.spec.sources[d]
        where = f"{source.shards[shard_id]}#{index}"
        if (d, shard_id) in self.corrupt:  # found damaged earlier in this pass: not read
            tracker.record(REST_OF_SHARD, source=source.path, key=where)
            return True
        if (d, shard_id) in self.unreachable:
            tracker.skipped_unread(STORAGE, source=source.path, key=where)
            return True
        if (d, shard_id, index) in worker_watch.skipped:  # a worker was stuck on it
            tracker.record(worker_watch.STUCK, source=source.path, key=where)
            return True
        return False

    def _finish(
        self,
        io: SourceIO,
        sample: Any,
        raw: RawSample | None,
        calls: int,
        tracker: ErrorTracker,
        d: int,
        shard_id: int,
        index: int,
    ) -> Iterable[Any]:
        """The encoded outputs of an assembled sample: cooked, its hook run, its key extended."""
        sample_index = self.slots.sample_index(calls)
        clock = CLOCK
        hook = self.direct_hook
        builder = io.builder
        # The hook indices are set where user code runs on the sample (hooks, cookers, ...).
        indexed = hook is not _IDENTITY or builder.kitchen is not None
        try:
            if indexed:
                hook_index.push(self.slots.batch_index(), sample_index)
            try:
                if builder.kitchen is not None:
                    sample = builder.cook(sample)
                if self.sizer is not None:
                    self.size = size_units(self.sizer(sample))
                key = restore_key_of(sample)
                if hook is None:  # a chain of hooks: each output made as it is taken
                    outputs = iter_encoded(
                        self.spec.task_encoder, sample, tracker=tracker, hooks=self.hooks
                    )
                elif hook is _IDENTITY:
                    tracker.succeeded()
                    return (encoded_key(sample, key, sample_index, 0),)
                else:
                    clock.start(ENCODE_SAMPLE)
                    try:
                        result = call_hook(hook, sample, stage=_ENCODE, tracker=tracker)
                    finally:
                        clock.stop()
                    if not inspect.isgenerator(result):
                        tracker.succeeded()
                        if result is NO_OUTPUT:  # the hook skipped the sample (counted)
                            return ()
                        return (encoded_key(result, key, sample_index, 0),)
                    outputs = hook_items(result, sample, stage=_ENCODE, tracker=tracker)
            finally:
                if indexed:
                    hook_index.pop()
        except Exception as e:
            self._failed(e, tracker, d, shard_id, index, raw)
            return ()
        return self._taken(outputs, key, sample_index, tracker, d, shard_id, index, raw)

    def _taken(
        self,
        outputs: Iterator[Any],
        key: Any,
        sample_index: int,
        tracker: ErrorTracker,
        d: int,
        shard_id: int,
        index: int,
        raw: RawSample | None,
    ) -> Iterator[Any]:
        """The outputs of a generator hook (or chain of hooks), each made as it is taken."""
        try:
            for made in itertools.count():
                hook_index.push(self.slots.batch_index(), sample_index)
                CLOCK.start(ENCODE_SAMPLE)
                try:
                    output = next(outputs, _END)
                finally:
                    CLOCK.stop()
                    hook_index.pop()
                if output is _END:
                    break
                yield encoded_key(output, key, sample_index, made)
        except Exception as e:
            self._failed(e, tracker, d, shard_id, index, raw)
            return
        tracker.succeeded()

    def _failed(
        self,
        e: Exception,
        tracker: ErrorTracker,
        d: int,
        shard_id: int,
        index: int,
        raw: RawSample | None,
    ) -> None:
        """Count (or raise) a failure of the reference at ``index`` of shard ``shard_id``."""
        source = self.spec.sources[d]
        if isinstance(e, SkipSample):  # e.g. raised by a cooker: a deliberate skip
            tracker.skip(describe(source, raw, shard_id, index), "cooking", source=source.path)
            return
        if isinstance(e, StokerError) and e.path is None:  # say which shard it came from
            e.path = f"{source.root}/{source.shards[shard_id]}"
            e.offset = raw.offset if raw is not None else None
        name = raw.key if raw is not None else f"{source.shards[shard_id]}#{index}"
        where = describe(source, raw, shard_id, index)
        tracker.failed(e, where, source=source.path, key=name)  # raises unless skipped
        if scope_of(e) == "shard":
            self.corrupt.add((d, shard_id))
        elif scope_of(e) == "storage":
            self.unreachable.add((d, shard_id))


class _Failure:
    """What :meth:`SampleStream._prepare` holds for a reference that failed to read or
    assemble: the error, reported when the stream reaches the reference."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


#: Marks the end of a hook's outputs.
_END: Any = object()
#: :func:`direct_hook` of a task encoder whose ``encode_sample`` returns its sample unchanged.
_IDENTITY: Any = object()
_ENCODE = "encode_sample"


def direct_hook(task_encoder: TaskEncoder[Any, Any, Any, Any], hooks: Sequence[str]) -> Any:
    """The task encoder's one per-sample hook (``encode_sample``) where ``hooks`` is just that
    hook, or ``_IDENTITY`` where it is the default one that returns its sample unchanged; None
    for a chain of hooks."""
    if list(hooks) != [_ENCODE]:
        return None
    if isinstance(task_encoder, TaskEncoder) and (
        not task_encoder._is_overridden(task_encoder.encode_sample)
        or (
            not task_encoder._is_overridden(task_encoder.encode_sample, (DefaultTaskEncoder,))
            and getattr(task_encoder, "_encoded_sample_type", _IDENTITY) is None
        )
    ):
        return _IDENTITY
    return task_encoder.encode_sample


def encoded_key(output: Any, key: Any, sample_index: int, made: int) -> Any:
    """``output`` (the ``made``-th of the per-sample hooks on a sample whose restore key is
    ``key``) with ``(sample_index, made)`` appended to that key: what ``restore_sample`` needs
    to run the hooks again as the stream did (the hooks' ``current_sample_index``, and which
    output of a generator hook). An output with a key of its own keeps it.

    Example:
        >>> encoded_key({"__restore_key__": ("Webdataset", "/d", 7)}, ("Webdataset", "/d", 7), 3, 1)
        {'__restore_key__': ('Webdataset', '/d', 7, 3, 1)}
    """
    if not isinstance(key, tuple) or len(key) != 3:
        return output
    if isinstance(output, dict):
        current = output.get("__restore_key__")
        if current is key or (isinstance(current, tuple) and current[:3] == key):
            output["__restore_key__"] = (*key, sample_index, made)
        return output
    current = getattr(output, "__restore_key__", None)
    if current is key or (isinstance(current, tuple) and current[:3] == key):
        try:  # noqa: SIM105 (per sample: suppress() costs more)
            output.__restore_key__ = (*key, sample_index, made)
        except (AttributeError, TypeError):  # frozen: left as it is
            pass
    return output


def describe(source: DataSource, raw: RawSample | None, shard_id: int, index: int) -> str:
    """Where a sample comes from, for error messages."""
    shard = source.shards[shard_id]
    key = f"sample {raw.key!r}" if raw is not None else f"sample #{index}"
    return f"{source.root}/{shard}, {key}"


def stages(spec: StreamSpec, stream: SampleStream) -> Node[tuple[Any, Position]]:
    """A stream's chain of nodes: ``stream`` -> optional packing (:class:`Packer`) -> grouped
    (:class:`Grouper`) or fixed-size (:class:`FixedBatcher`) batching."""
    maker = BatchMaker(spec.task_encoder, stream.slots, stream.tracker)
    source: RefSource = stream
    if spec.packing_buffer_size is not None:
        source = Packer(
            spec.task_encoder,
            spec.packing_buffer_size,
            source,
            stream.tracker,
            stream.slots,
            spec.packing_groups,
        )
    if spec.group_batches:
        return Grouper(maker, spec.batch_size, spec.drop_last, source, stream.tracker)
    return FixedBatcher(maker, spec.batch_size, spec.drop_last, source)


class HeldBatches(Node[tuple[Any, Position, "Buffers | None"]]):
    """A stream's batches, each with the position after it and what the stages hold then
    (the chain's state less the stream's own part): what a worker sends per batch."""

    name = "batches"

    def __init__(self, chain: Node[tuple[Any, Position]]) -> None:
        super().__init__()
        self.chain = chain

    def _reset(self, state: NodeState) -> None:
        self.chain.reset(state)

    def _upstreams(self) -> tuple[Node[Any], ...]:
        return (self.chain,)

    def state(self) -> NodeState:
        return self.chain.state()

    def _run(self) -> Iterator[tuple[Any, Position, Buffers | None]]:
        for batch, position in self.chain.items():
            yield batch, position, held(self.chain.state())


def held(state: NodeState) -> Buffers | None:
    """What the stages of a chain's ``state`` hold (all but the stream's position), or None."""
    out = {name: part for name, part in state.items() if name != SampleStream.name}
    return out or None


def batches(
    spec: StreamSpec,
    stream: SampleStream,
    buffers: Buffers | None = None,
    slots: BatchSlots | None = None,
) -> HeldBatches:
    """A stream's batches, each with the position after it and what the stages buffer then.

    ``buffers`` restores the stages (the stream starts where ``stream`` was made to start);
    ``slots`` says where the stream's batches fall on the rank (see :mod:`hook_index`).
    """
    if slots is not None:
        stream.slots = slots
    node = HeldBatches(stages(spec, stream))
    node.reset(dict(buffers) if buffers else None)
    return node
