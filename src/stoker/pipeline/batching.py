"""Batching: one batch from its samples (:class:`BatchMaker`: ``batch`` then ``encode_batch``,
with Energon's restore key and error handling, and the hook indices set, see
:mod:`stoker.pipeline.hook_index`), and the fixed-size batching node (:class:`FixedBatcher`).

The batch that ``batch`` returns gets ``__restore_key__ = ("BatchDataset", batch_index,
*the samples' restore keys)`` when it has such a field or key (a ``Batch``, a sample type, a
dataclass declaring it, or a dict holding ``"__restore_key__"``), as Energon sets it, whether the
default or a custom ``batch`` made it. A hook may raise ``SkipSample`` to drop the batch; other
failures go through the error policy (skipped and logged, or raised).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError
from stoker.pipeline.column_batches import ColumnSamples, samples_of
from stoker.pipeline.hook_index import HookCall
from stoker.pipeline.node import Node, NodeState
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.seeds import get_skip_safe
from stoker.pipeline.skip_policy import ErrorTracker
from stoker.pipeline.stage_clock import BATCH, CLOCK, ENCODE_BATCH

if TYPE_CHECKING:
    from stoker.model.task import TaskEncoder
    from stoker.pipeline.hook_index import BatchSlots
    from stoker.pipeline.refs import Position, RefSource, Runs

#: What :meth:`BatchMaker.make` returns for a batch that was skipped.
SKIPPED: Any = object()
#: What it returns for a batch another physical worker hands out (``BatchSlots.skipping``) when
#: ``batch`` and ``encode_batch`` are ``skip_safe``: the place of a batch, never handed out.
ELIDED: Any = None

#: The first element of the restore key of a batch (Energon's name for its batching stage).
BATCH_KEY = "BatchDataset"


def restore_key_of(sample: Any) -> Any:
    """A sample's ``__restore_key__`` (attribute or dict key), or None."""
    if isinstance(sample, dict):
        return sample.get("__restore_key__")
    return getattr(sample, "__restore_key__", None)


def set_restore_key(batch: Any, key: tuple[Any, ...]) -> None:
    """Set ``batch.__restore_key__`` (or the dict key) where the batch has one (as Energon)."""
    if isinstance(batch, dict):
        if "__restore_key__" in batch:
            batch["__restore_key__"] = key
        return
    if hasattr(batch, "__restore_key__"):
        with contextlib.suppress(AttributeError, TypeError):  # frozen: left as it is
            batch.__restore_key__ = key


class BatchMaker:
    """Makes one stream's batches and counts them (its :class:`BatchSlots`)."""

    def __init__(
        self,
        encoder: TaskEncoder[Any, Any, Any, Any],
        slots: BatchSlots,
        tracker: ErrorTracker,
    ) -> None:
        self.encoder, self.slots, self.tracker = encoder, slots, tracker
        #: Whether a batch another worker hands out is left unmade (Energon's #236).
        self.elides = batch_elided(encoder)

    def make(self, samples: list[Any] | ColumnSamples) -> Any:
        """The encoded batch of ``samples``, or :data:`SKIPPED` (``batch`` or ``encode_batch``
        skipped it on purpose, or failed under a skipping error policy), or :data:`ELIDED`."""
        if self.slots.skipping and self.elides:
            return ELIDED
        index = self.slots.batch_index()
        stage = "batch"
        with HookCall(index, BATCH):
            try:
                columnar = samples.columnar_batch() if isinstance(samples, ColumnSamples) else None
                if columnar is not None:  # a run of token sequences, batched from its columns
                    batch, keys = columnar
                else:
                    samples = samples_of(samples)
                    batch = self.encoder.batch(samples)
                    keys = [
                        s.get("__restore_key__")
                        if isinstance(s, dict)
                        else getattr(s, "__restore_key__", None)
                        for s in samples
                    ]  # restore_key_of, inline: once per sample
                set_restore_key(batch, (BATCH_KEY, index, *keys))
                stage = "encode_batch"
                CLOCK.switch(ENCODE_BATCH)
                batch = _one(self.encoder.encode_batch(batch))
            except SkipSample:
                self.tracker.skip(samples_of(samples), stage)
                return SKIPPED
            except Exception as e:
                self.tracker.failed(e, samples_of(samples), stage)  # raises unless policy skips
                return SKIPPED
        if batch is SKIPPED:
            return SKIPPED
        CLOCK.batched(len(samples))
        self.tracker.batch_succeeded()
        self.slots.made += 1
        return batch


class FixedBatcher(Node[tuple[Any, "Position"]]):
    """Batches of ``batch_size`` samples of an upstream node, each with the position after its
    last sample (``batch_size=None``: each sample alone, as encoded; Energon calls neither
    ``batch`` nor ``encode_batch`` then). Holds nothing between batches: its state is the
    upstream's.
    """

    name = "batch"

    def __init__(
        self, maker: BatchMaker, batch_size: int | None, drop_last: bool, upstream: RefSource
    ) -> None:
        super().__init__()
        self.maker, self.batch_size, self.drop_last = maker, batch_size, drop_last
        self.upstream = upstream

    def _reset(self, state: NodeState) -> None:
        self.upstream.reset(state)

    def _upstreams(self) -> tuple[Node[Any], ...]:
        return (self.upstream,)

    def state(self) -> NodeState:
        return self.upstream.state()

    def _run(self) -> Iterator[tuple[Any, Position]]:
        if self.batch_size is None:
            for sample, position, _ in self.upstream.items():
                self.maker.slots.made += 1
                CLOCK.batched(1)
                yield sample, position
            return
        runs = self.upstream.runs()
        if runs is not None:
            yield from self._from_runs(runs, self.batch_size)
            return
        pending: list[Any] = []
        last: Position | None = None
        for sample, last, _ in self.upstream.items():
            pending.append(sample)
            if len(pending) == self.batch_size:
                batch, pending = self.maker.make(pending), []
                if batch is not SKIPPED:
                    yield batch, last
        if pending and not self.drop_last and last is not None:
            batch = self.maker.make(pending)
            if batch is not SKIPPED:
                yield batch, last

    def _from_runs(self, runs: Runs, size: int) -> Iterator[tuple[Any, Position]]:
        """The batches of an upstream that hands out ``size`` samples at a time."""
        while (taken := runs.take(size)) is not None:
            samples, last = taken
            if len(samples) < size and self.drop_last:  # the last, short one
                return
            batch = self.maker.make(samples)
            if batch is not SKIPPED:
                yield batch, last


def batch_elided(encoder: TaskEncoder[Any, Any, Any, Any]) -> bool:
    """Whether ``batch`` and ``encode_batch`` are both ``skip_safe``: then a batch that another
    physical worker of a logical stream hands out is not made, and the stages before it may
    leave out their own ``skip_safe`` hooks for it too (Energon's #236)."""
    return get_skip_safe(encoder.batch) and get_skip_safe(encoder.encode_batch)


def _one(result: Any) -> Any:
    """The batch ``encode_batch`` returned or, from a generator, yielded (at most one)."""
    if not inspect.isgenerator(result):
        return result
    batches = list(result)
    if len(batches) > 1:
        raise ConfigError(
            f"encode_batch yielded {len(batches)} batches for one batch.",
            hint="Yield at most one batch per call (stoker saves positions per batch), or split "
            "the samples into several batches in batch_group_criterion / batch_size.",
        )
    return batches[0] if batches else SKIPPED


__all__ = [
    "BATCH_KEY",
    "ELIDED",
    "SKIPPED",
    "BatchMaker",
    "FixedBatcher",
    "batch_elided",
    "restore_key_of",
    "set_restore_key",
]
