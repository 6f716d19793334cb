"""Hypothesis properties of the planner: permutations, balance, jumps, determinism, elasticity."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.plan import StreamPlan, Topology
from stoker.plan.rng import WINDOW, keyed_rng
from stoker.plan.slices import stream_range

SETTINGS = settings(max_examples=60, deadline=None)

shard_counts = st.lists(st.integers(1, 40), min_size=1, max_size=12)
options = st.fixed_dictionaries(
    {
        "max_samples_per_sequence": st.none() | st.integers(1, 8),
        "parallel_shard_iters": st.integers(1, 5),
        "shuffle_buffer_size": st.integers(0, 12),
        "seed": st.integers(0, 2**32),
    }
)


@st.composite
def splits(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """Shard counts and a sorted subset of excluded global indices."""
    counts = draw(shard_counts)
    total = sum(counts)
    excluded = draw(st.lists(st.integers(0, total - 1), max_size=total // 3, unique=True))
    return counts, sorted(excluded)


def plans(counts: list[int], v: int, **kwargs: Any) -> list[StreamPlan]:
    return [StreamPlan(counts, stream, v, **kwargs) for stream in range(v)]


def naive_epoch(plan: StreamPlan, epoch: int, width: int, window: int, seed: int) -> list[int]:
    """The epoch built the slow, obvious way, from the plan's slices and slice order."""
    starts, lengths = plan.slices()
    order = plan.slice_order(epoch).tolist()
    out: list[int] = []
    for c in range(0, len(order), width):
        chunk = order[c : c + width]
        for j in range(max(int(lengths[i]) for i in chunk)):
            out.extend(int(starts[i]) + j for i in chunk if j < lengths[i])
    if window > 1:
        for w in range(0, len(out), window):
            perm = keyed_rng(seed, WINDOW, 0, plan.stream, epoch, w // window)
            part = out[w : w + window]
            out[w : w + window] = [part[k] for k in perm.permutation(len(part))]
    return out


@SETTINGS
@given(splits(), st.integers(1, 12), options, st.integers(0, 3))
def test_epoch_is_a_permutation_of_kept_samples(
    split: tuple[list[int], list[int]], v: int, kwargs: dict[str, Any], epoch: int
) -> None:
    counts, excluded = split
    streams = plans(counts, v, excluded=excluded, **kwargs)
    refs = np.concatenate([p.refs(epoch, 0, p.epoch_length(epoch)) for p in streams])
    kept = sorted(set(range(sum(counts))) - set(excluded))
    assert sorted(refs.tolist()) == kept
    sizes = [p.num_samples for p in streams]
    assert max(sizes) - min(sizes) <= 1


@SETTINGS
@given(splits(), st.integers(1, 4), options, st.sampled_from([1, 2, 3, -1]), st.data())
def test_refs_jump_equals_full_epoch_slice(
    split: tuple[list[int], list[int]], v: int, kwargs: dict[str, Any], m: int, data: Any
) -> None:
    counts, excluded = split
    stream = data.draw(st.integers(0, v - 1))
    plan = StreamPlan(
        counts, stream, v, excluded=excluded, shuffle_over_epochs_multiplier=m, **kwargs
    )
    epoch = data.draw(st.integers(0, 4))
    length = plan.epoch_length(epoch)
    full = plan.refs(epoch, 0, length)
    lo = data.draw(st.integers(0, length))
    hi = data.draw(st.integers(lo, length))
    assert plan.refs(epoch, lo, hi).tolist() == full[lo:hi].tolist()
    if plan.num_samples == 0:
        return
    p_lo = data.draw(st.integers(0, 3 * plan.num_samples))
    p_hi = p_lo + data.draw(st.integers(0, 3 * plan.num_samples))
    epochs: list[list[int]] = []
    while sum(map(len, epochs)) < p_hi:
        e = len(epochs)
        epochs.append(plan.refs(e, 0, plan.epoch_length(e)).tolist())
    joined = [ref for refs in epochs for ref in refs]
    assert plan.refs_at(p_lo, p_hi).tolist() == joined[p_lo:p_hi]


@SETTINGS
@given(shard_counts, st.integers(1, 4), options, st.integers(0, 2))
def test_matches_naive_interleave_and_window(
    counts: list[int], v: int, kwargs: dict[str, Any], epoch: int
) -> None:
    plan = StreamPlan(counts, v - 1, v, **kwargs)
    got = plan.refs(epoch, 0, plan.epoch_length(epoch)).tolist()
    width, window = kwargs["parallel_shard_iters"], kwargs["shuffle_buffer_size"]
    assert got == naive_epoch(plan, epoch, width, window, kwargs["seed"])


@SETTINGS
@given(shard_counts, st.integers(1, 6), options)
def test_deterministic_and_seed_and_epoch_sensitive(
    counts: list[int], v: int, kwargs: dict[str, Any]
) -> None:
    counts = [*counts, 64]  # enough samples and slices that a collision is negligible
    kwargs = {**kwargs, "max_samples_per_sequence": 2, "shuffle_buffer_size": 8}
    a = StreamPlan(counts, 0, v, **kwargs)
    b = StreamPlan(counts, 0, v, **kwargs)
    c = StreamPlan(counts, 0, v, **{**kwargs, "seed": kwargs["seed"] + 1})
    n = a.num_samples
    assert a.refs(1, 0, n).tolist() == b.refs(1, 0, n).tolist()
    assert a.refs(1, 0, n).tolist() != c.refs(1, 0, n).tolist()
    assert a.refs(1, 0, n).tolist() != a.refs(2, 0, n).tolist()


@SETTINGS
@given(splits(), st.integers(1, 12), options)
def test_ordered_gives_contiguous_sorted_ranges(
    split: tuple[list[int], list[int]], v: int, kwargs: dict[str, Any]
) -> None:
    counts, excluded = split
    kept = np.array(sorted(set(range(sum(counts))) - set(excluded)), dtype=np.int64)
    for stream, plan in enumerate(plans(counts, v, excluded=excluded, ordered=True, **kwargs)):
        lo, hi = stream_range(kept.size, stream, v)
        assert plan.refs(0, 0, plan.epoch_length(0)).tolist() == kept[lo:hi].tolist()


@SETTINGS
@given(splits(), st.integers(1, 6), options, st.integers(2, 4), st.integers(0, 2))
def test_multiplier_sees_every_sample_m_times_per_group(
    split: tuple[list[int], list[int]], v: int, kwargs: dict[str, Any], m: int, group: int
) -> None:
    counts, excluded = split
    seen: Counter[int] = Counter()
    for plan in plans(counts, v, excluded=excluded, shuffle_over_epochs_multiplier=m, **kwargs):
        for epoch in range(group * m, (group + 1) * m):
            seen.update(plan.refs(epoch, 0, plan.epoch_length(epoch)).tolist())
        if plan.num_samples:
            assert plan.position(group * m * plan.num_samples) == (group * m, 0)
    kept = set(range(sum(counts))) - set(excluded)
    assert set(seen) == kept
    assert set(seen.values()) <= {m}


topologies = st.integers(1, 4).flatmap(
    lambda w: st.integers(0, 4).flatmap(
        lambda n: st.integers(1, 3).map(lambda k: (w * max(n, 1) * k, w, n))
    )
)


def global_streams(v: int, w: int, n: int, batches: int) -> list[int]:
    """Stream of each global micro-batch j, gathered from every rank's and worker's view."""
    out = [-1] * batches
    for rank in range(w):
        topo = Topology(virtual_workers=v, world_size=w, rank=rank, num_workers=n)
        for t in range(batches // w):
            stream = topo.stream_of(t)
            assert stream in topo.worker_streams(topo.worker_of(t)).tolist()
            assert stream == topo.rank_streams()[t % topo.streams_per_rank]
            out[t * w + rank] = stream
    return out


@SETTINGS
@given(topologies, st.integers(1, 4), st.data())
def test_topology_is_elastic(topo: tuple[int, int, int], k: int, data: Any) -> None:
    v, w, n = topo
    expected = [j % v for j in range(k * v)]
    assert global_streams(v, w, n, k * v) == expected
    other_w = data.draw(st.sampled_from([d for d in range(1, v + 1) if v % d == 0]))
    other_n = data.draw(
        st.sampled_from([m for m in range(v + 1) if v % (other_w * max(m, 1)) == 0])
    )
    assert global_streams(v, other_w, other_n, k * v) == expected
