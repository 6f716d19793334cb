"""What a loader needs from a dataset: the batches of the streams a worker owns, and their count.

A *loadable* dataset (:class:`Loadable`: a :class:`~stoker.runtime.dataset.LoaderDataset` or a
:class:`~stoker.runtime.mix_batch.MixBatchDataset`) opens the streams (virtual workers) of one
dataloader worker, each as an iterator of ``(batch, position after it, buffered references)``,
from a :class:`Resume`. The loader never looks inside a position: it keeps the last one of each
stream and hands it back on restore.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stoker.model.task import ErrorTracker
from stoker.pipeline.hook_index import batch_slots
from stoker.pipeline.refs import Buffers, Position
from stoker.pipeline.skips import Skips
from stoker.pipeline.tolerance import hook_tolerances
from stoker.runtime.build import SampleBuilder
from stoker.runtime.float_batches import fuses_float_images
from stoker.runtime.logical_stride import strided
from stoker.runtime.sized_stream import SizedSampleStream
from stoker.runtime.stream import SampleStream, batches
from stoker.runtime.stream_spec import SourceIO

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.plan import Topology
    from stoker.runtime.dataset import LoaderDataset

#: A stream's batches: each with the stream's position after it and what its stages buffer then.
StreamBatches = Iterator[tuple[Any, Position, Buffers | None]]


@dataclass(frozen=True)
class Resume:
    """Where the workers start: stream positions (+ buffered references), finished streams,
    micro-batch and pass."""

    positions: dict[int, Position] = field(default_factory=dict)
    buffers: dict[int, Buffers] = field(default_factory=dict)
    exhausted: frozenset[int] = frozenset()
    t: int = 0
    epoch: int = 0


class OpenStreams(Protocol):
    """Some streams of a dataset, running in this process."""

    #: Per stream: its batches.
    batches: dict[int, StreamBatches]
    #: Per stream: the position it starts at (the resumed one, or the start of the pass).
    start: dict[int, Position]

    def take_skips(self) -> Skips | None:
        """What the streams skipped since the last call (None if nothing)."""
        ...

    def close(self) -> None:
        """Release the readers (open files, connections)."""


class Loadable(Protocol):
    """A dataset recipe a :class:`~stoker.runtime.loader.Loader` can iterate, save and restore."""

    @property
    def worker_config(self) -> WorkerConfig: ...

    @property
    def virtual_epoch_length(self) -> int: ...

    @property
    def limit(self) -> int | None: ...

    def topology(self) -> Topology: ...

    def with_virtual_workers(self, virtual_workers: int) -> Loadable | None:
        """The dataset over another number of streams, if that is still open (else None)."""
        ...

    def fingerprint(self) -> dict[str, Any]: ...

    def open_streams(self, streams: Sequence[int], resume: Resume) -> OpenStreams: ...

    def source_counts(self, positions: Mapping[int, Position], epoch: int) -> dict[str, int]:
        """References each data source has contributed up to ``positions`` in pass ``epoch``."""
        ...

    def position_size(self) -> int:
        """The length of a stream position's list form (``Position.to_list()``)."""
        ...

    def stream_len(self, stream: int) -> int:
        """Outputs one stream yields per pass (exact for 1:1 hooks without skipped samples)."""
        ...

    def __len__(self) -> int: ...


def take_skips(parts: Iterable[OpenStreams]) -> Skips | None:
    """What the streams of ``parts`` skipped since the last call, together (None if nothing)."""
    out = Skips()
    for part in parts:
        taken = part.take_skips()
        if taken:
            out.merge(taken)
    return out or None


def rank_len(dataset: Loadable) -> int:
    """Outputs this rank yields per pass: ``virtual_epoch_length`` if set, else the sum over its
    streams, at most ``limit``."""
    if dataset.virtual_epoch_length:
        return dataset.virtual_epoch_length
    streams = dataset.topology().rank_streams().tolist()
    total = sum(dataset.stream_len(s) for s in streams)
    return min(total, dataset.limit) if dataset.limit is not None else total


class DatasetStreams:
    """Streams of a :class:`~stoker.runtime.dataset.LoaderDataset` in one process, sharing its
    readers."""

    def __init__(self, dataset: LoaderDataset, streams: Sequence[int], resume: Resume) -> None:
        encoder = dataset.task_encoder
        fuse = fuses_float_images(
            encoder,
            dataset.batch_size,
            packing=dataset.packing_size is not None,
            grouping=dataset.group_batches,
        )
        self.io = [
            SourceIO(s.reader(), SampleBuilder(s, encoder.decoder, encoder, fuse_float_images=fuse))
            for s in dataset.sources
        ]
        tracker = self.tracker = ErrorTracker(
            dataset.error_policy, hook_limits=hook_tolerances(encoder)
        )
        #: Per stream: where it starts (the resumed position, or the start of the pass).
        self.start: dict[int, Position] = {}
        self.batches: dict[int, StreamBatches] = {}
        order = dataset.topology().rank_streams().tolist()  # the rank's batch order
        strides = dataset.strides()
        for s in streams:
            spec = dataset.stream_spec(s)
            kind = SizedSampleStream if spec.schedule.sized else SampleStream
            samples = kind(spec, self.io, tracker, resume.positions.get(s), resume.epoch)
            self.start[s] = samples.start
            slots = batch_slots(order, s, resume.t)
            self.batches[s] = batches(spec, samples, resume.buffers.get(s), slots)
            if strides is not None:  # workers share the stream: this one's batches only
                offset = strides.slot(s)[1]
                resumed = s in resume.positions
                self.batches[s] = strided(self.batches[s], slots, offset, strides.fanout, resumed)

    def take_skips(self) -> Skips | None:
        return self.tracker.take()

    def close(self) -> None:
        for source_io in self.io:
            source_io.reader.close()


def source_counts(
    dataset: LoaderDataset, positions: Mapping[int, Position], epoch: int
) -> dict[str, int]:
    """References each source of ``dataset`` contributed to streams at ``positions`` in pass
    ``epoch`` (positions count from the pass's start; a stream not in ``positions`` has given
    nothing yet this pass).

    Samples a task encoder skipped or expanded count as one reference each.
    """
    names = [source.path for source in dataset.sources]
    totals = dict.fromkeys(names, 0)
    strides = dataset.strides()
    if strides is not None:  # workers share streams: the furthest sharer's position counts
        furthest: dict[int, tuple[int, Position]] = {}
        for slot, at in positions.items():
            logical = strides.slot(slot)[0]
            if logical not in furthest or sum(at.counts) > sum(furthest[logical][1].counts):
                furthest[logical] = (slot, at)
        positions = dict(furthest.values())
    for stream, position in positions.items():
        schedule = dataset.schedule(stream)
        own = position.counts[: len(names)]  # a sized blend's size totals follow
        for name, count, first in zip(names, own, schedule.start(epoch), strict=True):
            totals[name] += count - first
        if position.skip:  # the reference in progress has started to contribute
            counts = list(position.counts)
            pending = schedule.next_block(counts, schedule.end(counts, epoch), 1)
            if len(pending):  # none where a wrapper runs the stream in another pass
                totals[names[int(pending[0])]] += 1
    return totals


def stream_batches(dataset: LoaderDataset, stream: int) -> int:
    """Batches one stream yields per pass: exact for 1:1 encoders without skipped samples."""
    schedule = dataset.schedule(stream)
    start = schedule.start(0)
    end = schedule.end(start, 0)
    if end is None:  # endless blend: one epoch of every source, its samples (as Energon's len)
        samples = sum(schedule.lengths)  # epoch 0 may be longer with shuffle_over_epochs > 1
    else:
        samples = sum(e - s for s, e in zip(start, end, strict=True))
    size = dataset.batch_size or 1
    return samples // size if dataset.batch_drop_last else -(-samples // size)


#: A dataset made of several loadable datasets (a mix, a concatenation).
M = TypeVar("M")


def over_virtual_workers(multi: M, datasets: Sequence[Loadable], virtual_workers: int) -> M | None:
    """A copy of ``multi`` whose ``datasets`` run over ``virtual_workers`` streams, or None if
    any of them had its count set explicitly."""
    moved = [d.with_virtual_workers(virtual_workers) for d in datasets]
    if any(d is None for d in moved):
        return None
    out = copy.copy(multi)
    out.datasets = [d for d in moved if d is not None]  # type: ignore[attr-defined]
    return out
