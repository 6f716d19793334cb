"""Hypothesis properties of the blend schedule: balance, jumps, determinism, exact totals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.plan import (
    BLEND,
    advance,
    epochized_allotments,
    epochized_choices,
    keyed_rng,
    weighted_choices,
)
from stoker.plan.blend import BLOCK
from stoker.plan.slices import stream_range

SETTINGS = settings(max_examples=60, deadline=None)

weights = st.lists(st.floats(0.05, 10.0), min_size=1, max_size=7)
seeds = st.integers(0, 2**32)
repetitions = st.sampled_from([0, 0.5, 1, 2, 0.3, 1.7, 2.5, 0.01, 3.999])


def split(ids: list[int] | np.ndarray, cuts: list[int]) -> list[np.ndarray]:
    return np.split(np.asarray(ids), sorted(set(cuts)))


@SETTINGS
@given(weights, st.integers(1, 4000), seeds, st.integers(0, 1000))
def test_every_prefix_is_close_to_its_share(w: list[float], n: int, seed: int, stream: int) -> None:
    ids = weighted_choices([0] * len(w), w, n, seed=seed, stream=stream)
    p = np.asarray(w) / sum(w)
    prefix = np.cumsum(np.eye(len(w), dtype=np.int64)[ids], axis=0)
    error = np.abs(prefix - np.arange(1, n + 1)[:, None] * p)
    assert (error <= 1 + p * max(len(w) - 2, 0) + 1e-6).all()
    if len(w) <= 3:
        assert error.max() <= 2 + 1e-6


@SETTINGS
@given(weights, st.integers(0, 3000), st.lists(st.integers(0, 3000), max_size=5), seeds)
def test_resumed_in_pieces_equals_uninterrupted(
    w: list[float], n: int, cuts: list[int], seed: int
) -> None:
    full = weighted_choices([0] * len(w), w, n, seed=seed, stream=2)
    state = np.zeros(len(w), np.int64)
    pieces = []
    for piece in split(full, [c for c in cuts if c <= n]):
        pieces.append(weighted_choices(state, w, piece.size, seed=seed, stream=2))
        state = advance(state, pieces[-1])
    assert np.concatenate([np.zeros(0, np.int64), *pieces]).tolist() == full.tolist()


@SETTINGS
@given(st.lists(st.floats(0.2, 1.0), min_size=2, max_size=5), seeds, st.integers(0, 100))
def test_deterministic_and_keyed(w: list[float], seed: int, stream: int) -> None:
    counts = [0] * len(w)
    a = weighted_choices(counts, w, 300, seed=seed, stream=stream)
    assert a.tolist() == weighted_choices(counts, w, 300, seed=seed, stream=stream).tolist()
    assert a.tolist() != weighted_choices(counts, w, 300, seed=seed + 1, stream=stream).tolist()
    assert a.tolist() != weighted_choices(counts, w, 300, seed=seed, stream=stream + 1).tolist()


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 500), repetitions), min_size=1, max_size=4),
    st.integers(1, 16),
    st.booleans(),
    seeds,
)
def test_allotments_total_exactly_floor_r_times_s(
    datasets: list[tuple[int, float]], virtual: int, balanced: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    sizes = np.array(
        [
            [np.subtract(*stream_range(s, v, virtual)[::-1]) for v in range(virtual)]
            if balanced
            else rng.integers(0, s // virtual + 2, virtual)
            for s, _ in datasets
        ],
        dtype=np.int64,
    )
    reps = [r for _, r in datasets]
    allot = epochized_allotments(sizes, reps)
    for d, r in enumerate(reps):
        total = Fraction(str(r)) * int(sizes[d].sum())
        assert int(allot[d].sum()) == int(total)  # floor(r * S), exact when integral
        whole = int(r) * sizes[d]
        assert (allot[d] >= whole).all() and (allot[d] - whole <= sizes[d]).all()


@SETTINGS
@given(
    st.lists(st.integers(0, 400), min_size=1, max_size=5),
    st.lists(st.integers(1, 600), max_size=6),
    seeds,
)
def test_epochized_choices_use_up_exactly_the_allotments(
    allot: list[int], chunks: list[int], seed: int
) -> None:
    full = epochized_choices([0] * len(allot), allot, 10**6, seed=seed, stream=1)
    assert full.size == sum(allot)
    assert np.bincount(full, minlength=len(allot)).tolist() == allot
    state, pieces = np.zeros(len(allot), np.int64), []
    for size in [*chunks, 10**6]:
        pieces.append(epochized_choices(state, allot, size, seed=seed, stream=1))
        assert pieces[-1].size == min(size, sum(allot) - int(state.sum()))
        state = advance(state, pieces[-1])
    assert np.concatenate(pieces).tolist() == full.tolist()


def merged(counts: list[int], w: list[float], n: int, seed: int) -> list[int]:
    """The next ``n`` ids the slow way: every dataset's next ``n`` due times, fully sorted."""
    p = np.asarray(w) / sum(w)
    due, ids = [], []
    for d, (c, pd) in enumerate(zip(counts, p, strict=True)):
        k = np.arange(c, c + n + 1)
        blocks = range(c // BLOCK, (c + n) // BLOCK + 1)
        u = np.concatenate([keyed_rng(seed, BLEND, 0, d, b).random(BLOCK) for b in blocks])
        due.append((k + u[k - blocks[0] * BLOCK]) / pd)
        ids.append(np.full(k.size, d))
    all_ids = np.concatenate(ids)
    return all_ids[np.lexsort((all_ids, np.concatenate(due)))][:n].tolist()


@SETTINGS
@given(
    weights, st.lists(st.integers(0, 20_000), min_size=7, max_size=7), st.integers(0, 700), seeds
)
def test_any_state_continues_like_the_full_merge(
    w: list[float], counts: list[int], n: int, seed: int
) -> None:
    """Also from counts no prefix reaches: the window widens until it provably suffices."""
    counts = counts[: len(w)]
    assert weighted_choices(counts, w, n, seed=seed, stream=0).tolist() == merged(
        counts, w, n, seed
    )
