"""One stream (virtual worker): scheduled references -> read -> decode -> sample -> encode -> batch.

A stream's position is ``(counts, skip)``: ``counts[d]`` references were taken from dataset ``d``
(its position in that dataset's stream plan), and the first ``skip`` outputs of the next
reference's ``encode_sample`` were already used. Every batch carries the position after it, so
saving state costs nothing and restoring re-reads at most the one sample whose outputs were split
between two batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import StokerError
from stoker.pipeline.build import SampleBuilder
from stoker.pipeline.read import RawSample, ShardReader
from stoker.pipeline.schedule import StreamSchedule
from stoker.plan import global_to_shard
from stoker.sources import DataSource
from stoker.task import ErrorTracker, TaskEncoder, iter_encoded

_BLOCK = 256


@dataclass(frozen=True)
class Position:
    """Where a stream resumes: per-dataset reference counts, minus ``skip`` used outputs."""

    counts: tuple[int, ...]
    skip: int = 0

    def to_list(self) -> list[int]:
        return [*self.counts, self.skip]

    @staticmethod
    def from_list(values: Sequence[int]) -> Position:
        return Position(tuple(int(v) for v in values[:-1]), int(values[-1]))


@dataclass
class StreamSpec:
    """Everything a worker needs to run one stream (picklable)."""

    sources: list[DataSource]
    schedule: StreamSchedule
    task_encoder: TaskEncoder[Any, Any, Any, Any]
    batch_size: int | None
    drop_last: bool


@dataclass
class SourceIO:
    """A worker's reader and sample builder for one data source."""

    reader: ShardReader
    builder: SampleBuilder


class SampleStream:
    """Encoded samples of one stream, each with the position after it."""

    def __init__(
        self,
        spec: StreamSpec,
        io: Sequence[SourceIO],
        tracker: ErrorTracker,
        start: Position | None,
        epoch: int,
    ) -> None:
        self.spec, self.io, self.tracker = spec, io, tracker
        self.epoch = epoch
        self.start = start or Position(tuple(spec.schedule.start(epoch)))

    def __iter__(self) -> Iterator[tuple[Any, Position]]:
        schedule = self.spec.schedule
        counts, skip = list(self.start.counts), self.start.skip
        while True:
            end = schedule.end(counts, self.epoch)
            choices = schedule.next_block(counts, end, _BLOCK)
            if len(choices) == 0:
                return
            refs = self._block_refs(counts, choices)
            taken = [0] * len(counts)
            for d in choices.tolist():
                ref, shard_id, index = refs[d][taken[d]]
                taken[d] += 1
                for used, output in enumerate(self._encode(d, shard_id, index, ref), start=1):
                    if used > skip:
                        yield output, Position(tuple(counts), used)
                skip = 0
                counts[d] += 1

    def _block_refs(self, counts: list[int], choices: np.ndarray) -> dict[int, list[Any]]:
        """(ref, shard, index) of each dataset's next references in this block; prefetched."""
        out: dict[int, list[Any]] = {}
        for d, n in enumerate(np.bincount(choices, minlength=len(counts)).tolist()):
            if n == 0:
                continue
            refs = self.spec.schedule.refs(d, counts[d], counts[d] + n)
            source = self.spec.sources[d]
            shard_ids, indices = global_to_shard(source.counts, refs)
            if source.first_index is not None:  # a subset: shards may start mid-way
                indices = indices + source.first_index[shard_ids]
            self.io[d].reader.prefetch(shard_ids, indices)
            out[d] = list(zip(refs.tolist(), shard_ids.tolist(), indices.tolist(), strict=True))
        return out

    def _encode(self, d: int, shard_id: int, index: int, ref: int) -> Iterator[Any]:
        source, io = self.spec.sources[d], self.io[d]
        raw: RawSample | None = None
        try:
            raw = io.reader.read(shard_id, index)
            sample = io.builder.build(raw, ref)
            outputs = list(iter_encoded(self.spec.task_encoder, sample))
        except Exception as e:
            if isinstance(e, StokerError) and e.path is None:  # say which shard it came from
                e.path = f"{source.root}/{source.shards[shard_id]}"
                e.offset = raw.offset if raw is not None else None
            self.tracker.failed(e, describe(source, raw, shard_id, index))
            return iter(())
        self.tracker.succeeded()
        return iter(outputs)


def describe(source: DataSource, raw: RawSample | None, shard_id: int, index: int) -> str:
    """Where a sample comes from, for error messages."""
    shard = source.shards[shard_id]
    key = f"sample {raw.key!r}" if raw is not None else f"sample #{index}"
    return f"{source.root}/{shard}, {key}"


def batches(
    spec: StreamSpec, samples: Iterator[tuple[Any, Position]]
) -> Iterator[tuple[Any, Position]]:
    """Group a stream's samples into batches (``task_encoder.batch`` + ``encode_batch``)."""
    encoder = spec.task_encoder
    if spec.batch_size is None:
        for sample, position in samples:
            yield encoder.encode_batch(sample), position
        return
    pending: list[Any] = []
    last: Position | None = None
    for sample, last in samples:
        pending.append(sample)
        if len(pending) == spec.batch_size:
            yield encoder.encode_batch(encoder.batch(pending)), last
            pending = []
    if pending and not spec.drop_last and last is not None:
        yield encoder.encode_batch(encoder.batch(pending)), last
