"""Hypothesis properties of the planner with few samples per stream (more streams than samples):
blends rotate their extra samples so every stream gets some, ranks and workers stay balanced,
and the fast path over many one-slice epochs equals the epoch-by-epoch computation."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.plan import StreamPlan, Topology
from stoker.plan.slices import blend_stream_sizes, rotations, stream_range, stream_sizes

SETTINGS = settings(max_examples=80, deadline=None)

options = st.fixed_dictionaries(
    {
        "max_samples_per_sequence": st.none() | st.integers(1, 4),
        "parallel_shard_iters": st.integers(1, 3),
        "shuffle_buffer_size": st.integers(0, 5),
        "shuffle_over_epochs_multiplier": st.sampled_from([1, 2, 3, -1, 0]),
        "seed": st.integers(0, 2**32),
    }
)


def epoch_by_epoch(plan: StreamPlan, p_lo: int, p_hi: int) -> list[int]:
    """The infinite view built from whole epochs, one at a time (no fast path)."""
    out: list[int] = []
    epoch = 0
    while len(out) < p_hi:
        out.extend(plan.refs(epoch, 0, plan.epoch_length(epoch)).tolist())
        epoch += 1
    return out[p_lo:p_hi]


@SETTINGS
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.integers(1, 40),
    options,
    st.integers(0, 50),
    st.integers(0, 30),
    st.integers(0, 60),
    st.data(),
)
def test_many_small_epochs_equal_epoch_by_epoch(
    counts: list[int],
    v: int,
    kwargs: dict[str, Any],
    rotation: int,
    p_lo: int,
    span: int,
    data: Any,
) -> None:
    stream = data.draw(st.integers(0, v - 1))
    plan = StreamPlan(counts, stream, v, rotation=rotation, **kwargs)
    if plan.num_samples == 0:
        return
    assert plan.refs_at(p_lo, p_lo + span).tolist() == epoch_by_epoch(plan, p_lo, p_lo + span)


@SETTINGS
@given(
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
    st.integers(1, 30),
    st.integers(0, 100),
    options,
    st.integers(0, 2),
)
def test_rotated_epoch_is_a_permutation(
    counts: list[int], v: int, rotation: int, kwargs: dict[str, Any], epoch: int
) -> None:
    streams = [StreamPlan(counts, s, v, rotation=rotation, **kwargs) for s in range(v)]
    if kwargs["shuffle_over_epochs_multiplier"] in (0, 1):
        refs = [r for p in streams for r in p.refs(epoch, 0, p.epoch_length(epoch)).tolist()]
        assert sorted(refs) == list(range(sum(counts)))
    sizes = [p.num_samples for p in streams]
    assert sizes == stream_sizes(sum(counts), v, rotation).tolist()
    assert max(sizes) - min(sizes) <= 1


@SETTINGS
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=5),
    st.integers(1, 8),
    st.integers(1, 4),
    st.integers(1, 3),
)
def test_blend_fills_every_stream_and_balances_ranks(
    totals: list[int], world: int, workers: int, k: int
) -> None:
    v = world * workers * k
    sizes = blend_stream_sizes(totals, v)
    assert sizes.sum(axis=1).tolist() == totals
    per_stream = sizes.sum(axis=0)
    # Energon's rotation: the blend as a whole spreads its samples evenly over the streams
    assert int(per_stream.max()) - int(per_stream.min()) <= 1
    if sum(totals) >= v:
        assert (per_stream >= 1).all()
    for topology in (Topology(v, world, r, workers) for r in range(world)):
        for d, total in enumerate(totals):
            got = int(sizes[d, topology.rank_streams()].sum())
            assert total // world <= got <= total // world + 1  # ranks within one sample
            per_worker = [int(sizes[d, topology.worker_streams(w)].sum()) for w in range(workers)]
            assert max(per_worker) - min(per_worker) <= 1


@SETTINGS
@given(st.integers(0, 500), st.integers(1, 64), st.integers(0, 200))
def test_stream_range_matches_sizes(total: int, v: int, rotation: int) -> None:
    edges = np.concatenate(([0], np.cumsum(stream_sizes(total, v, rotation))))
    got = [stream_range(total, s, v, rotation) for s in range(v)]
    assert got == list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
    assert rotations([total, 1], v).tolist() == [0, total % v]


@SETTINGS
@given(st.lists(st.integers(1, 20), min_size=1, max_size=6), st.integers(1, 4), options)
def test_multiplier_zero_reads_slices_in_order(
    counts: list[int], v: int, kwargs: dict[str, Any]
) -> None:
    """Energon's ``shuffle_over_epochs_multiplier=None``: no slice shuffle, every epoch alike
    before the shuffle buffer; with neither interleave nor window, the stream's range in order."""
    kwargs = {**kwargs, "shuffle_over_epochs_multiplier": 0}
    for stream in range(v):
        plan = StreamPlan(counts, stream, v, **kwargs)
        assert plan.slice_order(3).tolist() == list(range(plan.num_slices))
        plain = StreamPlan(counts, stream, v, **{**kwargs, "parallel_shard_iters": 1,
                                                 "shuffle_buffer_size": 0})  # fmt: skip
        lo, hi = stream_range(sum(counts), stream, v)
        assert plain.refs_at(0, 2 * (hi - lo)).tolist() == [*range(lo, hi), *range(lo, hi)]
