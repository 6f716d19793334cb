"""One reference of a stream to its encoded outputs: read, assemble, cook, run the per-sample
hooks, extend the restore key; a failure goes to the error policy with its file and offset.

:class:`SampleEncoding` is the part of :class:`~stoker.runtime.stream.SampleStream` that handles
one sample at a time (runs of many go through :mod:`stoker.runtime.prepared_runs`, which hands
its failures and its non-default hooks back here). Hook indices are set wherever user code runs
on the sample (sample loaders, part filters, joiners, cookers, hooks), as in Energon.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from stoker.errors import StokerError
from stoker.model.task import DefaultTaskEncoder, TaskEncoder, iter_encoded
from stoker.pipeline import hook_index
from stoker.pipeline.batching import restore_key_of
from stoker.pipeline.hook_index import BatchSlots
from stoker.pipeline.hooks import NO_OUTPUT, call_hook, hook_items
from stoker.pipeline.read import RawSample
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.skip_policy import ErrorTracker
from stoker.pipeline.stage_clock import CLOCK, DECODE, ENCODE_SAMPLE, READ
from stoker.plan.sized_blend import size_units
from stoker.runtime import worker_watch
from stoker.runtime.shard_health import ShardHealth
from stoker.runtime.stream_spec import SourceIO, StreamSpec
from stoker.sources.source import DataSource

#: Marks the end of a hook's outputs.
_END: Any = object()
#: :func:`direct_hook` of a task encoder whose ``encode_sample`` returns its sample unchanged.
IDENTITY: Any = object()
ENCODE = "encode_sample"


class SampleEncoding:
    """Encodes one reference at a time (a mixin of the stream, which owns the attributes)."""

    spec: StreamSpec
    io: Sequence[SourceIO]
    tracker: ErrorTracker
    #: Where this stream's batches fall on the rank (for the hooks' batch/sample indices).
    slots: BatchSlots
    #: The per-sample hooks (:func:`~stoker.model.task.sample_hooks`).
    hooks: list[str]
    #: The one per-sample hook, called directly (None: a chain of hooks; see :func:`direct_hook`).
    direct_hook: Any
    health: ShardHealth
    #: A sized blend's ``blend_sample_size`` (else None) and the size of the last sample it
    #: measured (:class:`~stoker.runtime.sized_stream.SizedSampleStream`).
    sizer: Any
    size: int

    def _encode(
        self, d: int, shard_id: int, index: int, ref: int, calls: int,
        tracker: ErrorTracker | None = None,
    ) -> Iterable[Any]:  # fmt: skip
        """The encoded outputs of one reference, the stream's ``calls``-th.

        A hook that returns one output is run here (the outputs come as a tuple); a generator
        hook's outputs are made as they are taken (it runs on as its outputs are batched), each
        with the hook indices of the batch being built then, as in Energon.
        """
        tracker = tracker or self.tracker
        worker_watch.at(d, shard_id, index)
        if (self.health.broken or worker_watch.skipped) and self.health.unread(
            self.spec.sources[d], d, shard_id, index, tracker
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

    def _finish(
        self, io: SourceIO, sample: Any, raw: RawSample | None, calls: int,
        tracker: ErrorTracker, d: int, shard_id: int, index: int,
    ) -> Iterable[Any]:  # fmt: skip
        """The encoded outputs of an assembled sample: cooked, its hook run, its key extended."""
        sample_index = self.slots.sample_index(calls)
        clock = CLOCK
        hook = self.direct_hook
        builder = io.builder
        # The hook indices are set where user code runs on the sample (hooks, cookers, ...).
        indexed = hook is not IDENTITY or builder.kitchen is not None
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
                elif hook is IDENTITY:
                    tracker.succeeded()
                    return (encoded_key(sample, key, sample_index, 0),)
                else:
                    clock.start(ENCODE_SAMPLE)
                    try:
                        result = call_hook(hook, sample, stage=ENCODE, tracker=tracker)
                    finally:
                        clock.stop()
                    if not inspect.isgenerator(result):
                        tracker.succeeded()
                        if result is NO_OUTPUT:  # the hook skipped the sample (counted)
                            return ()
                        return (encoded_key(result, key, sample_index, 0),)
                    outputs = hook_items(result, sample, stage=ENCODE, tracker=tracker)
            finally:
                if indexed:
                    hook_index.pop()
        except Exception as e:
            self._failed(e, tracker, d, shard_id, index, raw)
            return ()
        return self._taken(outputs, key, sample_index, tracker, d, shard_id, index, raw)

    def _taken(
        self, outputs: Iterator[Any], key: Any, sample_index: int, tracker: ErrorTracker,
        d: int, shard_id: int, index: int, raw: RawSample | None,
    ) -> Iterator[Any]:  # fmt: skip
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
        self, e: Exception, tracker: ErrorTracker, d: int, shard_id: int, index: int,
        raw: RawSample | None,
    ) -> None:  # fmt: skip
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
        self.health.note(e, d, shard_id)


def direct_hook(task_encoder: TaskEncoder[Any, Any, Any, Any], hooks: Sequence[str]) -> Any:
    """The task encoder's one per-sample hook (``encode_sample``) where ``hooks`` is just that
    hook, or :data:`IDENTITY` where it is the default one that returns its sample unchanged;
    None for a chain of hooks."""
    if list(hooks) != [ENCODE]:
        return None
    if isinstance(task_encoder, TaskEncoder) and (
        not task_encoder._is_overridden(task_encoder.encode_sample)
        or (
            not task_encoder._is_overridden(task_encoder.encode_sample, (DefaultTaskEncoder,))
            and getattr(task_encoder, "_encoded_sample_type", IDENTITY) is None
        )
    ):
        return IDENTITY
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


__all__ = ["ENCODE", "IDENTITY", "SampleEncoding", "describe", "direct_hook", "encoded_key"]
