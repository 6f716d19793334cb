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

from collections.abc import Generator, Iterator, Sequence
from typing import Any

import numpy as np

from stoker.errors import StokerError
from stoker.model.task import ErrorTracker, sample_hooks
from stoker.pipeline.batching import BatchMaker, FixedBatcher
from stoker.pipeline.group import Grouper
from stoker.pipeline.hook_index import BatchSlots
from stoker.pipeline.node import Node, NodeState
from stoker.pipeline.pack import Packer
from stoker.pipeline.refs import Buffers, Position, Ref, RefSource, Runs, pick
from stoker.pipeline.refs import position as make_position
from stoker.pipeline.skip_policy import ErrorPolicy
from stoker.plan import global_to_shard
from stoker.runtime import column_pieces
from stoker.runtime.plain_runs import same_runs
from stoker.runtime.prepared_runs import BlockRefs, Prepared, PreparedRuns
from stoker.runtime.sample_encoding import IDENTITY, direct_hook
from stoker.runtime.shard_health import ShardHealth
from stoker.runtime.stream_spec import SourceIO, StreamSpec

#: References planned (and prefetched) at a time: small for the first block, so the first batch
#: comes soon; larger after, so remote reads coalesce over whole shard slices (fewer requests).
_FIRST_BLOCK, _BLOCK = 1024, 4096
#: Whether samples are read, assembled and encoded in runs, and batched from lists
#: (:meth:`SampleStream.runs`); False: one by one (what tests compare with).
RUNS = True


class SampleStream(PreparedRuns, RefSource):
    """Encoded samples of one stream, each with the position after it and its reference (the
    leaf node of a stream's chain; its state is ``{"stream": position}``).

    The stream walks its plan block by block (:meth:`_chunks`); a sample's way to its outputs
    is :class:`~stoker.runtime.sample_encoding.SampleEncoding` (one at a time) or
    :class:`~stoker.runtime.prepared_runs.PreparedRuns` (runs of one dataset).
    """

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
        self.slots = BatchSlots()
        self.hooks = sample_hooks(spec.task_encoder, packing=spec.packing_buffer_size is not None)
        self.direct_hook = direct_hook(spec.task_encoder, self.hooks)
        #: Shards found damaged or unreachable in this pass: the rest of their samples are
        #: skipped unread, each counted.
        self.health = ShardHealth()
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

        Runs of one dataset are read and assembled ahead (:meth:`_prepare`) and, under the default
        ``encode_sample``, cooked and keyed in one loop (:meth:`_plain`), never past the list being
        filled (each hook sees the index of the batch its sample goes into); others one by one."""
        counts, skip = list(self.start.counts), self.start.skip
        calls = sum(counts)  # the stream's encode_sample calls so far (sum of the counts)
        encode, prepared, health = self._encode, self._prepared, self.health
        # Datasets read and assembled in runs (no user code before cooking), each with a queue
        bulk = [RUNS and io.builder.bulk for io in self.io]
        queues = [Prepared() for _ in counts]
        identity = self.direct_hook is IDENTITY  # each sample is its one output (_plain)
        new_out = column_pieces.collector(self._columnar and column_pieces.applies(self, identity))
        out: Any = new_out()
        last: tuple[Position, Ref] | None = None
        want: int = yield  # type: ignore[misc]  # primed by Runs / _run
        for choices, refs in self._blocks(list(counts)):
            taken = [0] * len(counts)
            for d, length in same_runs(choices):
                mine, queue = refs[d], queues[d]
                stop = taken[d] + length
                while taken[d] < stop:
                    at = taken[d]
                    if bulk[d] and queue.at == len(queue.samples):
                        self._prepare(d, mine, at, queue)
                    if identity and not skip and queue.at < queue.good and not health.broken:
                        n = min(stop - at, want - len(out), queue.good - queue.at)
                        done, made = self._plain(queue, n, d, mine, at, counts, calls, out)
                        last = made or last
                        taken[d] += done
                        calls += done
                    else:
                        shard_id, index = mine[1][at], mine[2][at]
                        outputs = (
                            prepared(queue, d, shard_id, index, calls)
                            if bulk[d]
                            else encode(d, shard_id, index, mine[0][at], calls)
                        )
                        taken[d] += 1
                        for used, output in enumerate(outputs, start=1):
                            if used > skip:
                                out.append(output)
                                last = make_position(tuple(counts), used), (d, counts[d], used - 1)
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

    def _blocks(self, counts: list[int]) -> Iterator[tuple[np.ndarray, dict[int, BlockRefs]]]:
        """The stream's plan from ``counts`` on, block by block: the dataset ids of a block's
        references and each dataset's references. The next block is located (and so
        prefetched) before a block is handed out, so that its reads overlap this one's."""
        block = self._next_block(counts, _FIRST_BLOCK)
        while block is not None:
            choices = block[0]
            counts = np.add(counts, np.bincount(choices, minlength=len(counts))).tolist()
            after = self._next_block(counts, _BLOCK)
            yield block
            block = after

    def _next_block(
        self, counts: list[int], size: int
    ) -> tuple[np.ndarray, dict[int, BlockRefs]] | None:
        """The dataset ids of the ``size`` references from ``counts`` and their references
        (prefetched)."""
        schedule = self.spec.schedule
        choices = schedule.next_block(counts, schedule.end(counts, self.epoch), size)
        return None if len(choices) == 0 else (choices, self._block_refs(counts, choices))

    def _block_refs(self, counts: list[int], choices: np.ndarray) -> dict[int, BlockRefs]:
        """The global indices, shards and indices in the shard of each dataset's next references
        in this block (three lists); prefetched."""
        out: dict[int, BlockRefs] = {}
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
