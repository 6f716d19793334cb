"""One stream (virtual worker): planned references -> read -> decode -> sample -> encode -> batch.

A stream's position is ``(epoch, offset, skip)``: the next reference is at ``offset`` of the
stream's plan for ``epoch``, and the first ``skip`` outputs of its ``encode_sample`` were already
used. Every batch carries the position after it, so saving state costs nothing and restoring
re-reads at most the one sample whose outputs were split between two batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from stoker.errors import StokerError
from stoker.pipeline.build import SampleBuilder
from stoker.pipeline.read import RawSample, ShardReader
from stoker.plan import StreamPlan, global_to_shard
from stoker.sources import DataSource
from stoker.task import ErrorTracker, TaskEncoder, iter_encoded

_BLOCK = 256


@dataclass(frozen=True)
class Position:
    """Where a stream resumes: reference ``offset`` of ``epoch``, minus ``skip`` used outputs."""

    epoch: int = 0
    offset: int = 0
    skip: int = 0

    def to_list(self) -> list[int]:
        return [self.epoch, self.offset, self.skip]

    @staticmethod
    def from_list(values: list[int]) -> Position:
        return Position(*map(int, values))


@dataclass
class StreamSpec:
    """Everything a worker needs to run one stream (picklable)."""

    source: DataSource
    plan: StreamPlan
    task_encoder: TaskEncoder[Any, Any, Any, Any]
    batch_size: int | None
    drop_last: bool
    repeat: bool


class SampleStream:
    """Encoded samples of one stream, each with the position after it."""

    def __init__(
        self,
        spec: StreamSpec,
        reader: ShardReader,
        builder: SampleBuilder,
        tracker: ErrorTracker,
        start: Position,
    ) -> None:
        self.spec = spec
        self.reader = reader
        self.builder = builder
        self.tracker = tracker
        self.start = start

    def __iter__(self) -> Iterator[tuple[Any, Position]]:
        epoch, offset, skip = self.start.epoch, self.start.offset, self.start.skip
        plan = self.spec.plan
        while True:
            length = plan.epoch_length(epoch)
            while offset < length:
                hi = min(offset + _BLOCK, length)
                refs = plan.refs(epoch, offset, hi)
                shard_ids, indices = global_to_shard(self.spec.source.counts, refs)
                self.reader.prefetch(shard_ids, indices)
                for i in range(len(refs)):
                    position = offset + i
                    outputs = self._encode(int(shard_ids[i]), int(indices[i]), int(refs[i]))
                    for used, output in enumerate(outputs, start=1):
                        if used > skip:
                            yield output, Position(epoch, position, used)
                    skip = 0
                offset = hi
            if not self.spec.repeat:
                return
            epoch, offset = epoch + 1, 0

    def _encode(self, shard_id: int, index: int, ref: int) -> Iterator[Any]:
        source = self.spec.source
        encoder = self.spec.task_encoder
        raw: RawSample | None = None
        try:
            raw = self.reader.read(shard_id, index)
            sample = self.builder.build(raw, ref)
            outputs = list(iter_encoded(encoder, sample))
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
    position = Position()
    for sample, position in samples:
        pending.append(sample)
        if len(pending) == spec.batch_size:
            yield encoder.encode_batch(encoder.batch(pending)), position
            pending = []
    if pending and not spec.drop_last:
        yield encoder.encode_batch(encoder.batch(pending)), position
