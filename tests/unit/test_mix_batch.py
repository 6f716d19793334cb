"""The mixing stage over in-memory sub-streams, its position layout, and the concat helpers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from stoker import (
    Batch,
    ConfigError,
    StokerError,
    concat_pad,
    generic_concat,
    homogeneous_concat_mix,
)
from stoker.pipeline.mix import MixSpec, MixStream, SubState, decode, encode
from stoker.pipeline.refs import Position

Output = tuple[Any, Position, Any]


def counter(d: int, start: int, end: int | None = None) -> Iterator[Output]:
    """Sub-stream ``d``: sub-batch ``(d, k)`` at position ``k + 1``, from ``start`` (to ``end``)."""
    for k in itertools.count(start) if end is None else range(start, end):
        yield (d, k), Position((k + 1,), 0), ({"group": {"k": k}} if k % 3 else None)


def stream(
    spec: MixSpec, ends: list[int | None], start: list[SubState] | None = None, skip: int = 0
) -> MixStream:
    start = start or [SubState(Position((0,), 0)) for _ in ends]
    subs = [
        counter(d, s.position.counts[0], end)
        for d, (s, end) in enumerate(zip(start, ends, strict=True))
    ]
    return MixStream(spec, subs, start, skip)


def spec(weights: tuple[float, ...], batch_size: int = 3, mix_fn: Any = list) -> MixSpec:
    return MixSpec(weights, batch_size, mix_fn, seed=7, stream=2)


def test_position_layout_round_trips() -> None:
    subs = [SubState(Position((4, 9), 1), {"pack": {"x": [1]}}, 3, False),
            SubState(Position((2,), 0), None, 5, True)]  # fmt: skip
    position, held = encode(subs, 2)
    assert position.to_list() == [4, 9, 1, 3, 0, 2, 0, 5, 1, 2]
    assert held == {"0": {"pack": {"x": [1]}}}
    assert decode(position, held, [2, 1]) == (subs, 2)
    with pytest.raises(ConfigError, match="same MixBatchDataset"):
        decode(position, held, [1, 1])


def test_outputs_are_whole_sub_batches_in_weighted_proportion() -> None:
    outputs = list(itertools.islice(stream(spec((3.0, 1.0), batch_size=4), [None, None]), 250))
    taken = [0, 0]
    for n, (group, _, _) in enumerate(outputs, start=1):
        assert len(group) == 4
        for d, k in group:
            assert k == taken[d]  # each sub-stream's batches in order, none lost or repeated
            taken[d] += 1
        # two datasets: the blend schedule keeps every prefix within 1 of its share
        assert abs(taken[0] - 0.75 * 4 * n) <= 1 + 1e-9
    subs, skip = decode(outputs[-1][1], outputs[-1][2], [1, 1])
    assert [(s.position.counts[0], s.taken) for s in subs] == [(t, t) for t in taken]
    assert skip == 0 and sum(taken) == 1000


def test_a_sub_stream_that_runs_out_drops_out() -> None:
    outputs = list(stream(spec((1.0, 1.0)), [4, 30]))
    ids = [sub for group, _, _ in outputs for sub in group]
    assert sorted(ids) == [(0, k) for k in range(4)] + [(1, k) for k in range(30)]
    assert len(outputs) == 12 and len(outputs[-1][0]) == 1  # 34 sub-batches, the last group short
    subs, _ = decode(outputs[-1][1], outputs[-1][2], [1, 1])
    assert [s.done for s in subs] == [True, True]  # the last group found both at their ends
    assert [s.taken for s in subs] == [4, 30]


def pairs(group: list[Any]) -> Iterator[Any]:
    """Two outputs per group."""
    yield group[:1]
    yield group[1:]


@pytest.mark.parametrize("mix_fn", [list, pairs])
def test_restoring_any_position_continues_exactly(mix_fn: Any) -> None:
    ends: list[int | None] = [None, 20]
    reference = list(itertools.islice(stream(spec((1.0, 2.0), mix_fn=mix_fn), ends), 40))
    skips = []
    for i, (_, position, held) in enumerate(reference):
        subs, skip = decode(position, held, [1, 1])
        skips.append(skip)
        resumed = stream(spec((1.0, 2.0), mix_fn=mix_fn), ends, subs, skip)
        tail = [out for out, _, _ in itertools.islice(resumed, 40 - i - 1)]
        assert tail == [out for out, _, _ in reference[i + 1 :]], f"restore after {i + 1}"
    assert (max(skips) > 0) == (mix_fn is pairs)  # inside a group only with several outputs


def test_concat_pad_pads_every_dimension_but_the_first() -> None:
    out = concat_pad([torch.ones(2, 1, 3), torch.full((1, 2, 2), 2.0)])
    assert out.shape == (3, 2, 3)
    assert out[:2, 0].tolist() == [[1.0, 1.0, 1.0]] * 2 and not out[:2, 1].any()
    assert out[2].tolist() == [[2.0, 2.0, 0.0], [2.0, 2.0, 0.0]]
    with pytest.raises(StokerError, match="batch_mix_fn"):
        concat_pad([torch.ones(2, 2), torch.ones(2)])


@dataclass
class TextBatch(Batch):
    tokens: torch.Tensor
    text: list[str]


def text_batch(keys: list[str], width: int) -> TextBatch:
    return TextBatch(__key__=keys, __restore_key__=tuple(keys), tokens=torch.ones(len(keys), width),
                     text=[k.upper() for k in keys])  # fmt: skip


def test_homogeneous_concat_mix_joins_batches_field_by_field() -> None:
    out = homogeneous_concat_mix([text_batch(["a", "b"], 2), text_batch(["c"], 4)])
    assert isinstance(out, TextBatch)
    assert out.__key__ == ["a", "b", "c"] and out.__restore_key__ == ("a", "b", "c")
    assert out.text == ["A", "B", "C"] and out.tokens.shape == (3, 4)
    assert out.__subflavors__ is None
    assert generic_concat([{"n": 1}, {"n": 2}]) == {"n": [1, 2]}  # a per-batch value: listed
    with pytest.raises(StokerError, match="several types: TextBatch, dict"):
        homogeneous_concat_mix([text_batch(["a"], 1), {"x": torch.ones(1)}])
