"""The stage protocol (``pipeline/node.py``) over the real packing, grouping, batching and mixing
stages: they compose as nodes, nest their state by name, and a chain reset from a state taken
at any midpoint continues exactly as the chain that was not stopped."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from stoker.pipeline.batching import BatchMaker, FixedBatcher
from stoker.pipeline.group import Grouper
from stoker.pipeline.hook_index import BatchSlots
from stoker.pipeline.mix import MixSpec, MixStream, SubState
from stoker.pipeline.node import Node, NodeState
from stoker.pipeline.pack import Packer
from stoker.pipeline.refs import Position, Ref, RefSource
from stoker.pipeline.skip_policy import ErrorPolicy, ErrorTracker


class Ints(RefSource):
    """A leaf: the ints ``0 .. n-1``, sample ``i`` at position ``(i + 1,)``, ref ``(0, i, 0)``."""

    name = "stream"

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.position = Position((0,), 0)
        self.rereads: list[Ref] = []

    def _reset(self, state: NodeState) -> None:
        self.position = state.get(self.name, Position((0,), 0))

    def state(self) -> NodeState:
        return {self.name: self.position}

    def _run(self) -> Iterator[tuple[Any, Position, Ref]]:
        for i in range(self.position.counts[0], self.n):
            self.position = Position((i + 1,), 0)
            yield i, self.position, (0, i, 0)

    def reread(self, refs: Sequence[Ref]) -> list[Any]:
        self.rereads += refs
        return [ref[1] for ref in refs]

    def where(self, ref: Ref) -> str:
        return f"int #{ref[1]}"


class Encoder:
    """The task encoder hooks the stages call: packs of up to 3 samples summing to <= 12,
    groups by parity (odd numbers in batches of 3), batches as lists."""

    def select_samples_to_pack(self, samples: list[int]) -> list[list[int]]:
        groups: list[list[int]] = []
        for sample in samples:
            if groups and len(groups[-1]) < 3 and sum(groups[-1]) + sample <= 12:
                groups[-1].append(sample)
            else:
                groups.append([sample])
        return groups[:-1]  # the last (maybe not full) group waits for more

    def postencode_sample(self, sample: int) -> int:
        return sample

    def pack_selected_samples(self, samples: list[int]) -> tuple[int, ...]:
        return tuple(samples)

    def batch_group_criterion(self, sample: Any) -> tuple[int, int | None]:
        total = sample if isinstance(sample, int) else sum(sample)
        return total % 2, (3 if total % 2 else None)

    def batch(self, samples: list[Any]) -> list[Any]:
        return list(samples)

    def encode_batch(self, batch: list[Any]) -> list[Any]:
        return batch


def chain(kind: str, n: int = 40) -> Node[tuple[Any, Position]]:
    encoder: Any = Encoder()
    tracker = ErrorTracker(ErrorPolicy(mode="raise"))
    maker = BatchMaker(encoder, BatchSlots(), tracker)
    source: RefSource = Ints(n)
    if "pack" in kind:
        source = Packer(encoder, 4, source, tracker)
    if "group" in kind:
        return Grouper(maker, 2, False, source, tracker)
    return FixedBatcher(maker, 2, False, source)


KINDS = ["batch", "pack+batch", "group", "pack+group"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_chain_reset_from_any_midpoint_continues_the_same(kind: str) -> None:
    full = list(chain(kind))
    assert len(full) > 5
    for midpoint in range(len(full) + 1):
        node = chain(kind)
        head = [node.next() for _ in range(midpoint)]
        state = node.state()
        node.close()
        again = chain(kind)
        again.reset(state)
        assert head + list(again) == full, f"{kind} at {midpoint}: {state}"


def test_the_state_nests_each_stage_under_its_name() -> None:
    node = chain("pack+group")
    node.next()
    state = node.state()
    assert set(state) == {"stream", "pack", "group"}
    assert set(state["pack"]) == {"refs", "popped", "used"}
    assert isinstance(state["group"]["buckets"], list)
    fixed = chain("batch")
    fixed.next()
    assert fixed.state() == {"stream": Position((2,), 0)}  # a stage that holds nothing adds no key


def test_a_restored_stage_rereads_only_what_it_held() -> None:
    node = chain("pack+group")
    for _ in range(3):
        node.next()
    state = node.state()
    again = chain("pack+group")
    again.reset(state)
    again.next()
    leaf = again.upstream.upstream  # type: ignore[attr-defined]
    held = len(leaf.rereads)
    assert 0 < held < state["stream"].counts[0]


def test_reset_without_a_state_starts_over_and_close_closes_the_chain() -> None:
    node = chain("pack+batch")
    first = [node.next() for _ in range(3)]
    node.reset()
    assert [node.next() for _ in range(3)] == first
    node.close()
    leaf = node.upstream.upstream  # type: ignore[attr-defined]
    assert leaf._items is None and node._items is None  # generators released
    assert list(node) == list(chain("pack+batch"))  # a closed node starts over when used again


def mix_of(ends: list[int], start: list[SubState] | None = None) -> MixStream:
    nodes = [Counted(d, n) for d, n in enumerate(ends)]
    first = start or [SubState(Position((0,), 0)) for _ in ends]
    return MixStream(MixSpec((2.0, 1.0), 3, list, seed=5, stream=0), nodes, first, 0)


class Counted(Node[tuple[Any, Position, Any]]):
    """A sub-dataset's batch node: batch ``k`` at position ``(k + 1,)``, holding ``{"n": k}``
    after odd batches (as a grouping stage would)."""

    name = "stream"

    def __init__(self, d: int, n: int) -> None:
        super().__init__()
        self.d, self.n, self.at = d, n, 0

    def _reset(self, state: NodeState) -> None:
        position = state.get(self.name)
        self.at = position.counts[0] if position is not None else 0

    def state(self) -> NodeState:
        return {self.name: Position((self.at,), 0)}

    def _run(self) -> Iterator[tuple[Any, Position, Any]]:
        while self.at < self.n:
            self.at += 1
            yield (self.d, self.at), Position((self.at,), 0), None


def test_mix_composes_over_batch_nodes_and_resets_from_its_state() -> None:
    full = list(mix_of([9, 5]))
    assert len(full) == 5  # 14 sub-batches, 3 at a time
    assert sorted(b for batch, _, _ in full for b in batch) == sorted(
        [(0, k) for k in range(1, 10)] + [(1, k) for k in range(1, 6)]
    )
    for midpoint in range(len(full) + 1):
        node = mix_of([9, 5])
        head = [node.next() for _ in range(midpoint)]
        state = node.state()
        assert set(state) == {"mix"}
        again = mix_of([9, 5])
        again.reset(state)
        assert head + list(again) == full
