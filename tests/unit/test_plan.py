"""Concrete examples of the planner's semantics (stoker.plan)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stoker.plan import (
    SLICE_ORDER,
    WINDOW,
    StreamPlan,
    Topology,
    default_virtual_workers,
    global_to_shard,
    keyed_rng,
)
from stoker.plan.interleave import Chunks
from stoker.plan.slices import compact_to_global, cut_slices, exclusion_shift, stream_range


def test_keyed_rng_is_deterministic_and_keyed() -> None:
    a = keyed_rng(7, SLICE_ORDER, 0, 1, 2).integers(0, 2**62, 4)
    assert a.tolist() == keyed_rng(7, SLICE_ORDER, 0, 1, 2).integers(0, 2**62, 4).tolist()
    # (seed + 1, epoch - 1) must not collide with (seed, epoch), unlike seed + epoch.
    assert a.tolist() != keyed_rng(8, SLICE_ORDER, 0, 1, 1).integers(0, 2**62, 4).tolist()
    assert a.tolist() != keyed_rng(7, WINDOW, 0, 1, 2).integers(0, 2**62, 4).tolist()
    assert isinstance(keyed_rng(7).bit_generator, np.random.Philox)


def test_keyed_rng_is_the_generator_of_the_seed_sequence_of_its_words() -> None:
    # keyed_rng hashes words below 2**32 from one uint32 array: the plan's draws (every saved
    # plan's order) must stay those of SeedSequence([seed, *key]) bit for bit.
    big = [2**32 - 1, 2**32, 2**40 + 5, 2**64 + 3]
    for words in [
        (0,),
        (7, WINDOW, 0, 0, 0, 0),
        (3, 0, 1, 2, 3, 99),
        *[(s, 2, 1, 0, s) for s in big],
    ]:
        for last in range(40):
            key = (*words, last)
            want = np.random.Generator(np.random.Philox(np.random.SeedSequence(list(key))))
            got = keyed_rng(*key)
            assert got.permutation(100).tolist() == want.permutation(100).tolist()
            assert got.integers(0, 2**62, 3).tolist() == want.integers(0, 2**62, 3).tolist()
    assert keyed_rng(np.int64(5), np.uint32(2)).random() == keyed_rng(5, 2).random()


def test_keyed_rng_rejects_negative() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        keyed_rng(-1, SLICE_ORDER)


def test_stream_ranges_are_balanced() -> None:
    assert [stream_range(10, v, 4) for v in range(4)] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [stream_range(2, v, 3) for v in range(3)] == [(0, 1), (1, 2), (2, 2)]
    # a blend rotates the extra samples of each dataset past those of the datasets before it
    assert [stream_range(2, v, 3, rotation=2) for v in range(3)] == [(0, 1), (1, 1), (1, 2)]


def test_slices_cut_at_shard_boundaries_and_msps() -> None:
    offsets = np.array([0, 5, 12, 12, 14])  # shards of 5, 7, 0 and 2 samples
    starts, lengths = cut_slices(offsets, 2, 14, 3)
    assert starts.tolist() == [2, 5, 7, 9, 12]
    assert lengths.tolist() == [3, 2, 2, 3, 2]
    starts, lengths = cut_slices(offsets, 2, 14, None)
    assert (starts.tolist(), lengths.tolist()) == ([2, 5, 12], [3, 7, 2])
    assert cut_slices(offsets, 4, 4, 3)[0].size == 0


def test_round_robin_interleave() -> None:
    chunks = Chunks.build(np.array([2, 0, 1]), np.array([0, 10, 20]), np.array([3, 1, 2]), width=3)
    # Slices (in order) 20-21, 0-2, 10: element j of slice i ranked by (j, i); short ones drop out.
    assert chunks.lookup(np.arange(6)).tolist() == [20, 0, 10, 21, 1, 2]
    two = Chunks.build(np.array([0, 1, 2]), np.array([0, 10, 20]), np.array([3, 1, 2]), width=2)
    assert two.offsets.tolist() == [0, 4, 6]
    assert two.lookup(np.arange(6)).tolist() == [0, 10, 1, 2, 20, 21]


def test_chunk_lookup_is_the_same_one_by_one_and_in_bulk() -> None:
    # Bulk lookups use a per-chunk slot table, single ones a per-position scan: both must agree.
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 9, size=23)
    starts = np.cumsum(lengths) - lengths
    chunks = Chunks.build(rng.permutation(23), starts, lengths, width=5)
    bulk = chunks.lookup(np.arange(chunks.total))
    single = [int(chunks.lookup(np.array([p]))[0]) for p in range(chunks.total)]
    assert bulk.tolist() == single
    assert sorted(single) == list(range(int(lengths.sum())))


def test_window_shuffle_keeps_window_contents() -> None:
    common = {"seed": 3, "parallel_shard_iters": 2, "max_samples_per_sequence": 4}
    plain = StreamPlan([9, 8], 0, 1, shuffle_buffer_size=0, **common)
    shuffled = StreamPlan([9, 8], 0, 1, shuffle_buffer_size=5, **common)
    a, b = plain.refs(0, 0, 17), shuffled.refs(0, 0, 17)
    assert a.tolist() != b.tolist()
    for lo in range(0, 17, 5):
        assert sorted(a[lo : lo + 5].tolist()) == sorted(b[lo : lo + 5].tolist())


def test_ordered_walks_the_range_and_skips_excluded() -> None:
    plan = StreamPlan([4, 4], 1, 2, seed=0, ordered=True, excluded=[1, 5])
    assert plan.num_samples == 3
    assert plan.refs(0, 0, 3).tolist() == [4, 6, 7]
    assert plan.refs(1, 0, 3).tolist() == [4, 6, 7]
    assert compact_to_global(np.arange(4), exclusion_shift(np.array([0, 1]))).tolist() == [
        2,
        3,
        4,
        5,
    ]


def test_infinite_view_crosses_epochs() -> None:
    plan = StreamPlan([5, 5], 0, 1, seed=9, max_samples_per_sequence=2, shuffle_buffer_size=3)
    assert plan.position(23) == (2, 3)
    joined = np.concatenate([plan.refs(e, 0, 10) for e in range(3)])
    assert plan.refs_at(7, 25).tolist() == joined[7:25].tolist()
    blocks = plan.iter_refs(4, block=4)
    first, second = next(blocks), next(blocks)
    assert (first.start, second.start) == (4, 8)
    assert np.concatenate([first.refs, second.refs]).tolist() == joined[4:12].tolist()


def test_multiplier_minus_one_draws_with_replacement() -> None:
    plan = StreamPlan([3, 1, 6], 0, 1, seed=2, shuffle_over_epochs_multiplier=-1)
    lengths = [plan.epoch_length(e) for e in range(4)]
    assert any(length != 10 for length in lengths)
    p = lengths[0] + lengths[1] + 1
    assert plan.position(p) == (2, 1)
    assert plan.refs_at(p, p + 2).tolist() == plan.refs(2, 1, 3).tolist()


def test_global_to_shard() -> None:
    shards, local = global_to_shard([3, 0, 2], [0, 2, 3, 4])
    assert shards.tolist() == [0, 0, 2, 2]
    assert local.tolist() == [0, 2, 0, 1]
    with pytest.raises(ValueError, match="refs must be"):
        global_to_shard([3, 2], [5])


def test_topology_assignment() -> None:
    topo = Topology(virtual_workers=12, world_size=3, rank=2, num_workers=2)
    assert topo.rank_streams().tolist() == [2, 5, 8, 11]
    assert topo.worker_streams(0).tolist() == [2, 8]
    assert [topo.stream_of(t) for t in range(6)] == [2, 5, 8, 11, 2, 5]
    assert [topo.worker_of(t) for t in range(4)] == [0, 1, 0, 1]
    assert [topo.batch_number(t) for t in (0, 3, 4, 9)] == [0, 0, 1, 2]
    main = Topology(virtual_workers=2, world_size=2, rank=0, num_workers=0)
    assert main.worker_streams(0).tolist() == [0]
    assert default_virtual_workers(4, 0) == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"virtual_workers": 6, "world_size": 4, "rank": 0, "num_workers": 1}, "multiple"),
        ({"virtual_workers": 8, "world_size": 2, "rank": 2, "num_workers": 1}, "rank"),
        ({"virtual_workers": 8, "world_size": 0, "rank": 0, "num_workers": 1}, "world_size"),
        ({"virtual_workers": 8, "world_size": 2, "rank": 0, "num_workers": -1}, "num_workers"),
    ],
)
def test_topology_validation(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Topology(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"stream": 2}, "stream"),
        ({"virtual_workers": 0}, "virtual_workers"),
        ({"seed": -1}, "seed"),
        ({"max_samples_per_sequence": 0}, "max_samples_per_sequence"),
        ({"parallel_shard_iters": 0}, "parallel_shard_iters"),
        ({"shuffle_over_epochs_multiplier": -2}, "multiplier"),  # 0: slices in order
        ({"excluded": [3, 1]}, "excluded"),
        ({"excluded": [10]}, "excluded"),
        ({"shard_counts": [3, -1]}, "shard_counts"),
        ({"shard_counts": [[3]]}, "shard_counts"),
    ],
)
def test_stream_plan_validation(kwargs: dict[str, Any], match: str) -> None:
    args: dict[str, Any] = {"shard_counts": [4, 6], "stream": 0, "virtual_workers": 2, "seed": 0}
    with pytest.raises(ValueError, match=match):
        StreamPlan(**{**args, **kwargs})


def test_out_of_range_positions_raise() -> None:
    plan = StreamPlan([4], 0, 1, seed=0)
    with pytest.raises(ValueError, match="epoch_length=4"):
        plan.refs(0, 2, 5)
    empty = StreamPlan([1], 1, 2, seed=0)
    assert empty.epoch_length(0) == 0
    assert empty.refs(0, 0, 0).size == 0
    with pytest.raises(ValueError, match="no samples"):
        empty.position(0)
