"""Concrete examples of the blend schedule (stoker.plan.blend)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.plan import (
    BLEND,
    StreamPlan,
    advance,
    epochized_allotments,
    epochized_choices,
    keyed_rng,
    weighted_choices,
)
from stoker.plan.blend import BLOCK
from stoker.plan.slices import stream_range


def prefix_counts(ids: np.ndarray, d: int) -> np.ndarray:
    """``out[L - 1, j]``: samples of dataset ``j`` among the first ``L`` ids."""
    return np.cumsum(np.eye(d, dtype=np.int64)[ids], axis=0)


def naive(weights: list[float], n: int, seed: int, stream: int) -> list[int]:
    """All due times built the obvious way from whole keyed blocks, sorted by (T, d)."""
    p = np.asarray(weights) / sum(weights)
    items = []
    for d, pd in enumerate(p):
        k = np.arange(int(n * pd) + 50)
        blocks = [
            keyed_rng(seed, BLEND, stream, d, b).random(BLOCK) for b in range(k[-1] // BLOCK + 1)
        ]
        u = np.concatenate(blocks)[k]
        items += [((kk + uu) / pd, d) for kk, uu in zip(k, u, strict=True)]
    return [d for _, d in sorted(items)[:n]]


def test_five_to_two_keeps_the_ratio_at_every_prefix() -> None:
    ids = weighted_choices([0, 0], [5, 2], 7000, seed=3, stream=1)
    assert ids.dtype == np.int64 and ids.size == 7000
    counts = np.bincount(ids).tolist()
    assert abs(counts[0] - 5000) <= 2 and abs(counts[1] - 2000) <= 2
    lengths = np.arange(1, 7001)[:, None]
    error = np.abs(prefix_counts(ids, 2) - lengths * np.array([5, 2]) / 7)
    assert error.max() <= 1 + 1e-9  # 1 + p_d (D - 2) with D = 2; the design promises 2


def test_matches_the_naive_merge_across_block_boundaries() -> None:
    weights = [1.0, 3.0, 0.5]
    n = 2 * BLOCK + 900  # dataset 1 crosses its first block boundary
    assert weighted_choices([0, 0, 0], weights, n, seed=9, stream=4).tolist() == naive(
        weights, n, 9, 4
    )


def test_resuming_from_counts_gives_the_tail() -> None:
    full = weighted_choices([0, 0, 0], [1, 2, 3], 10_000, seed=1, stream=0)
    for m in (0, 1, 4095, 4096, 6001, 10_000):
        state = advance([0, 0, 0], full[:m])
        tail = weighted_choices(state, [1, 2, 3], 10_000 - m, seed=1, stream=0)
        assert tail.tolist() == full[m:].tolist()


def test_seed_and_stream_change_the_sequence() -> None:
    base = weighted_choices([0, 0], [1, 1], 100, seed=1, stream=0)
    assert base.tolist() == weighted_choices([0, 0], [1, 1], 100, seed=1, stream=0).tolist()
    assert base.tolist() != weighted_choices([0, 0], [1, 1], 100, seed=2, stream=0).tolist()
    assert base.tolist() != weighted_choices([0, 0], [1, 1], 100, seed=1, stream=1).tolist()


def test_zero_weight_and_empty_requests() -> None:
    ids = weighted_choices([0, 0, 0], [1, 0, 1], 500, seed=0, stream=0)
    assert set(ids.tolist()) == {0, 2}
    assert weighted_choices([5, 5], [1, 1], 0, seed=0, stream=0).size == 0
    assert weighted_choices(np.array([7]), [2.5], 3, seed=0, stream=0).tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("counts", "weights", "n"),
    [([0], [-1.0], 1), ([0, 0], [0, 0], 1), ([0], [np.nan], 1), ([0], [1, 1], 1),
     ([-1, 0], [1, 1], 1), ([0.5, 0], [1, 1], 1), ([0, 0], [1, 1], -1)],
)  # fmt: skip
def test_bad_input_is_a_config_error(counts: list[float], weights: list[float], n: int) -> None:
    with pytest.raises(ConfigError):
        weighted_choices(counts, weights, n, seed=0, stream=0)  # type: ignore[arg-type]


def test_allotments_split_fractions_exactly() -> None:
    sizes = np.array([[3, 3, 4], [2, 3, 3], [4, 3, 3]])
    allot = epochized_allotments(sizes, [2, 0.5, 2.3])
    assert allot.tolist() == [[6, 6, 8], [1, 1, 2], [9, 7, 7]]
    assert allot.sum(axis=1).tolist() == [20, 4, 23]  # floor(r * S), with 2.3 read as 23/10
    assert epochized_allotments(np.zeros((1, 4), np.int64), [1.5]).tolist() == [[0, 0, 0, 0]]
    with pytest.raises(ConfigError):
        epochized_allotments(sizes, [1, 1])
    with pytest.raises(ConfigError):
        epochized_allotments(sizes, [1, -1, 1])


def test_energon_tutorial_repetitions_two_and_a_half() -> None:
    """r = 2 and 0.5, no repeat: every sample of ds 0 exactly twice, half of ds 1 once."""
    shards, virtual = [[7, 5, 9], [6, 6, 5]], 4
    total = [sum(s) for s in shards]
    sizes = np.array([[np.subtract(*stream_range(t, v, virtual)[::-1]) for v in range(virtual)]
                      for t in total])  # fmt: skip
    allot = epochized_allotments(sizes, [2, 0.5])
    seen: list[Counter[int]] = [Counter(), Counter()]
    for v in range(virtual):
        ids = epochized_choices([0, 0], allot[:, v], 10**6, seed=5, stream=v)
        assert np.bincount(ids, minlength=2).tolist() == allot[:, v].tolist()
        for d in range(2):
            plan = StreamPlan(shards[d], v, virtual, seed=5, dataset_id=d, shuffle_buffer_size=4)
            seen[d].update(plan.refs_at(0, int(allot[d, v])).tolist())
    assert seen[0] == dict.fromkeys(range(total[0]), 2)
    assert set(seen[1].values()) == {1} and sum(seen[1].values()) == total[1] // 2


def test_epochized_choices_stop_each_dataset_at_its_allotment() -> None:
    allot = [300, 0, 50, 7]
    first = epochized_choices([0, 0, 0, 0], allot, 200, seed=2, stream=3)
    state = advance([0, 0, 0, 0], first)
    rest = epochized_choices(state, allot, 1000, seed=2, stream=3)
    assert first.size == 200 and rest.size == 157
    assert advance(state, rest).tolist() == allot
    assert epochized_choices(allot, allot, 10, seed=2, stream=3).size == 0
    assert epochized_choices([0, 0], [0, 0], 10, seed=2, stream=3).size == 0
    one_shot = epochized_choices([0, 0, 0, 0], allot, 357, seed=2, stream=3)
    assert one_shot.tolist() == first.tolist() + rest.tolist()
