"""Remote read-ahead: coalesced requests, the byte budget, errors, restarts and forks."""

from __future__ import annotations

import io
import os
import random
import tarfile
import threading
from typing import BinaryIO

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stoker.pipeline.read_ahead as read_ahead_module
from stoker.errors import ConfigError, StorageError
from stoker.format.tar_index import encode_offsets, tar_index_name
from stoker.pipeline.prefetch import (
    FIRST_REQUEST,
    Prefetcher,
    plan_requests,
    split_head,
)
from stoker.pipeline.prefetch_plan import ShardSamples, by_shard, plan_shards
from stoker.pipeline.read import ShardReader
from stoker.storage import Store
from stoker.storage.options import LoaderOptions, activate


@pytest.fixture(autouse=True)
def fresh_read_ahead() -> None:
    """Each test starts with a new read-ahead of the process (none left by another test)."""
    read_ahead_module._PROCESS.clear()


class MemStore(Store):
    """Files in memory, not local (as an object store), counting ranged reads."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.root = "mem://test"
        self.files = dict(files)
        self.reads: list[tuple[str, int, int]] = []
        self.failing: set[str] = set()
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()

    def url(self, path: str) -> str:
        return f"{self.root}/{path}"

    def exists(self, path: str) -> bool:
        return path in self.files

    def is_dir(self, path: str) -> bool:
        return any(name.startswith(path + "/") for name in self.files)

    def size(self, path: str) -> int:
        return len(self.files[path])

    def open(self, path: str) -> BinaryIO:
        return io.BytesIO(self.files[path])

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        self.gate.wait(10)
        with self.lock:
            self.reads.append((path, offset, size))
        if path in self.failing:
            raise StorageError("GET failed after 3 attempt(s).", path=self.url(path))
        return self.files[path][offset : offset + size]

    def list_files(self, path: str = "") -> list[str]:
        return sorted(self.files)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.files[path] = data

    def publish(self, tmp_path: str, path: str) -> None:
        self.files[path] = self.files.pop(tmp_path)

    def remove(self, path: str) -> None:
        self.files.pop(path, None)

    def local_path(self, path: str) -> str | None:
        return None


def shard_bytes(prefix: str, n: int, size: int) -> tuple[bytes, list[int]]:
    """A tar of ``n`` samples (one ``txt`` part of ``size`` bytes) and its N+1 offsets."""
    buffer = io.BytesIO()
    offsets: list[int] = []
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(n):
            offsets.append(tar.offset)
            data = f"{prefix}{i:05d}:".encode().ljust(size, b"x")
            info = tarfile.TarInfo(f"{prefix}{i:05d}.txt")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        offsets.append(tar.offset)
    return buffer.getvalue(), offsets


def make_store(shards: int = 3, per_shard: int = 40, size: int = 1000) -> MemStore:
    files: dict[str, bytes] = {}
    for s in range(shards):
        data, offsets = shard_bytes(f"s{s}_", per_shard, size)
        files[f"shard_{s}.tar"] = data
        files[tar_index_name(f"shard_{s}.tar")] = encode_offsets(offsets)
    return MemStore(files)


def shard_names(store: MemStore) -> list[str]:
    return sorted(n for n in store.files if n.endswith(".tar"))


def refs(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([s for s, _ in pairs], dtype=np.int64),
        np.array([i for _, i in pairs], dtype=np.int64),
    )


def direct(store: MemStore, pairs: list[tuple[int, int]]) -> list[dict[str, bytes]]:
    reader = ShardReader(store, shard_names(store))
    return [reader.read(s, i).parts for s, i in pairs]


def all_pairs(store: MemStore, per_shard: int = 40) -> list[tuple[int, int]]:
    return [(s, i) for s in range(len(shard_names(store))) for i in range(per_shard)]


# -- planning ---------------------------------------------------------------------------------


def test_ranges_closer_than_the_gap_are_one_request_within_the_cap() -> None:
    samples = [("a", 0, 10), ("a", 10, 20), ("a", 25, 30), ("a", 100, 110), ("b", 0, 5)]
    requests = plan_requests(samples, gap=5, cap=1000)
    assert [(r.name, r.start, r.end) for r in requests] == [
        ("a", 0, 30), ("a", 100, 110), ("b", 0, 5)
    ]  # fmt: skip
    assert requests[0].samples == [(0, 10), (10, 20), (25, 30)]
    capped = plan_requests([("a", i * 10, i * 10 + 10) for i in range(10)], gap=5, cap=35)
    assert [(r.start, r.end) for r in capped] == [(0, 30), (30, 60), (60, 90), (90, 100)]
    big = plan_requests([("a", 0, 100), ("a", 100, 110)], gap=5, cap=50)
    assert [(r.start, r.end) for r in big] == [(0, 100), (100, 110)]


def test_requests_are_ordered_by_first_need_and_duplicates_share_one() -> None:
    samples = [("b", 50, 60), ("a", 0, 10), ("b", 0, 10), ("a", 0, 10)]
    requests = plan_requests(samples, gap=0, cap=1000)
    assert [(r.name, r.start, r.end, r.first) for r in requests] == [
        ("b", 50, 60, 0), ("a", 0, 10, 1), ("b", 0, 10, 2)
    ]  # fmt: skip
    assert requests[1].samples == [(0, 10), (0, 10)]


def _plan_one_by_one(samples: list[tuple[str, int, int]], gap: int, cap: int) -> list[tuple]:
    """The plan as a loop over samples (the reference the array planner must match)."""
    by_name: dict[str, list[tuple[int, int, int]]] = {}
    for position, (name, start, end) in enumerate(samples):
        by_name.setdefault(name, []).append((start, end, position))
    plan: list[list] = []
    for name, items in by_name.items():
        current: list | None = None
        for start, end, position in sorted(items):
            if (
                current is not None
                and start - current[2] <= gap
                and max(end, current[2]) - current[1] <= cap
            ):
                current[2] = max(current[2], end)
                current[3] = min(current[3], position)
            else:
                current = [name, start, end, position, []]
                plan.append(current)
            current[4].append((start, end))
    return sorted((tuple(r) for r in plan), key=lambda r: r[3])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.integers(0, 300), st.integers(0, 60)),
        max_size=60,
    ),
    st.integers(0, 40),
    st.integers(1, 200),
)
def test_the_array_planner_plans_as_a_loop_over_samples(
    items: list[tuple[str, int, int]], gap: int, cap: int
) -> None:
    samples = [(name, start, start + size) for name, start, size in items]
    planned = [
        (r.name, r.start, r.end, r.first, r.samples)
        for r in plan_requests(samples, gap=gap, cap=cap)
    ]
    assert planned == _plan_one_by_one(samples, gap, cap)
    # by shard as arrays, placed by any increasing numbering: the same plan
    shards = [
        ShardSamples(
            name,
            np.array([3 * p + 7 for p, s in enumerate(samples) if s[0] == name], dtype=np.int64),
            np.array([s[1] for s in samples if s[0] == name], dtype=np.int64),
            np.array([s[2] for s in samples if s[0] == name], dtype=np.int64),
        )
        for name in sorted({s[0] for s in samples}, reverse=True)
    ]
    arrays = [
        (r.name, r.start, r.end, r.first, r.samples) for r in plan_shards(shards, gap=gap, cap=cap)
    ]
    assert arrays == planned


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 30)), min_size=1, max_size=20),
    st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 30)), max_size=20),
)
def test_a_later_announcement_counts_reads_of_ranges_already_coming(
    first: list[tuple[str, int]], second: list[tuple[str, int]]
) -> None:
    """Samples announced inside requests already queued are one more read of the first request
    that holds them; only the others are planned anew (in their order among themselves)."""
    store = MemStore({"a": bytes(400), "b": bytes(400)})
    store.gate.clear()  # nothing arrives: the requests stay as planned
    ahead = read_ahead_module.ReadAhead(10_000, 1, gap=15, cap=60)
    reader = ahead.register(store)
    ahead.want(reader, [(name, 10 * i, 10 * i + 10) for name, i in first])
    before = {
        key: [(c.request, c.wanted) for c in chunks] for key, chunks in ahead._by_name.items()
    }
    expected_wanted = {
        id(request): wanted for chunks in before.values() for request, wanted in chunks
    }
    fresh = []
    for name, i in second:
        start, end = 10 * i, 10 * i + 10
        holding = [
            r for r, _ in before.get((reader, name), []) if r.start <= start and end <= r.end
        ]
        if holding:
            expected_wanted[id(holding[0])] += 1
        else:
            fresh.append((name, start, end))
    shards = by_shard([(name, 10 * i, 10 * i + 10) for name, i in second])
    ahead.want_shards(reader, shards)
    chunks = [c for cs in ahead._by_name.values() for c in cs]
    old = [c for c in chunks if id(c.request) in expected_wanted]
    assert {id(c.request): c.wanted for c in old} == expected_wanted
    new = sorted(
        (c for c in chunks if id(c.request) not in expected_wanted), key=lambda c: c.request.first
    )
    planned = plan_requests(fresh, gap=15, cap=60)
    assert [(c.request.name, c.request.start, c.request.end) for c in new] == [
        (r.name, r.start, r.end) for r in planned
    ]
    store.gate.set()
    ahead.forget(reader)


# -- reading ----------------------------------------------------------------------------------


def test_prefetched_samples_equal_direct_reads_in_few_requests() -> None:
    store = make_store()
    pairs = all_pairs(store)
    random.Random(0).shuffle(pairs)
    expected = direct(store, pairs)
    store.reads.clear()
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs(pairs))
    got = [reader.read(s, i).parts for s, i in pairs]
    assert got == expected
    assert len(store.reads) == 3  # one request per shard, nothing read directly
    assert sorted(p for p, _, _ in store.reads) == shard_names(store)
    assert reader._ahead is not None and reader._ahead.held_bytes == 0
    reader.close()


def test_blocks_prefetched_ahead_are_all_used() -> None:
    store = make_store()
    pairs = all_pairs(store)
    random.Random(1).shuffle(pairs)
    expected = direct(store, pairs)
    store.reads.clear()
    reader = ShardReader(store, shard_names(store))
    blocks = [pairs[i : i + 16] for i in range(0, len(pairs), 16)]
    reader.prefetch(*refs(blocks[0]))
    got = []
    for k, block in enumerate(blocks):
        if k + 1 < len(blocks):
            reader.prefetch(*refs(blocks[k + 1]))  # the next block, before reading this one
        got += [reader.read(s, i).parts for s, i in block]
    assert got == expected
    assert len(store.reads) <= 3 * len(blocks)  # per block at most one request per shard
    reader.close()


def test_the_budget_limits_the_bytes_held_and_reads_still_complete() -> None:
    store = make_store(shards=8, per_shard=10, size=1000)
    pairs = all_pairs(store, per_shard=10)
    expected = direct(store, pairs)
    store.reads.clear()
    reader = ShardReader(store, shard_names(store))
    offsets = reader.offsets(0)
    ahead = Prefetcher(store, budget=2 * int(offsets[-1] - offsets[0]) + 10, threads=4)
    reader._ahead = ahead
    reader.prefetch(*refs(pairs))
    # Requests are at most a quarter of the budget: half a shard each.
    assert ahead.service.request_cap < int(offsets[-1] - offsets[0])
    assert ahead.requests == 4  # two shards' worth; the other six wait for room
    got = []
    for s, i in pairs:
        got.append(reader.read(s, i).parts)
        assert ahead.held_bytes <= ahead.budget
    assert got == expected
    assert ahead.requests == 16 and len(store.reads) == 16
    reader.close()


def test_a_sample_needed_before_its_turn_is_fetched_at_once() -> None:
    store = make_store(shards=4, per_shard=10)
    pairs = all_pairs(store, per_shard=10)
    expected = dict(zip(pairs, direct(store, pairs), strict=True))
    reader = ShardReader(store, shard_names(store))
    reader._ahead = Prefetcher(store, budget=1, threads=2)
    reader.prefetch(*refs(pairs))
    assert reader._ahead.requests == 1
    last = pairs[-1]
    assert reader.read(*last).parts == expected[last]  # its request jumps the queue
    for pair in pairs[:-1]:
        assert reader.read(*pair).parts == expected[pair]
    reader.close()


def test_duplicates_skips_and_unannounced_reads() -> None:
    store = make_store()
    pairs = [(0, 1), (0, 2), (0, 1), (1, 5), (2, 7)]
    expected = direct(store, [(0, 1), (0, 2), (1, 5), (2, 7), (1, 9)])
    store.reads.clear()
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs(pairs))
    assert reader.read(0, 1).parts == expected[0]
    assert reader.read(0, 1).parts == expected[0]  # announced twice: served twice
    # (0, 2) is skipped; (1, 9) was never announced: read directly
    assert reader.read(1, 9).parts == expected[4]
    assert reader.read(1, 5).parts == expected[2]
    assert reader.read(2, 7).parts == expected[3]
    # A third read: from shard 0's request, which still waits for a read (of the skipped
    # (0, 2)); then it is let go, and a fourth read is direct.
    assert reader.read(0, 1).parts == expected[0]
    assert len(store.reads) == 3 + 1
    assert reader.read(0, 1).parts == expected[0]
    assert len(store.reads) == 3 + 2


def test_an_out_of_range_index_is_left_for_read_to_report() -> None:
    store = make_store()
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs([(0, 0), (0, 999)]))
    assert reader.read(0, 0).key == "s0_00000"
    with pytest.raises(Exception, match="outside the shard's index"):
        reader.read(0, 999)
    reader.close()


def test_a_failed_request_surfaces_on_read_of_its_samples_only() -> None:
    store = make_store()
    store.failing.add("shard_1.tar")
    reader = ShardReader(store, shard_names(store))
    pairs = [(0, 0), (1, 0), (1, 1), (2, 0)]
    reader.prefetch(*refs(pairs))
    assert reader.read(0, 0).key == "s0_00000"
    for index in (0, 1):
        with pytest.raises(StorageError, match="GET failed"):
            reader.read(1, index)
    assert reader.read(2, 0).key == "s2_00000"
    reader.close()


def test_close_shuts_the_pool_down_and_forgets_what_was_announced() -> None:
    store = make_store()
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs([(0, 0), (1, 0), (2, 0)]))
    pool = reader._ahead.service._pool if reader._ahead else None
    assert pool is not None
    threads = [t for t in threading.enumerate() if t.name.startswith("stoker-prefetch")]
    reader.close()
    for t in threads:
        t.join(5)
        assert not t.is_alive()
    store.reads.clear()
    assert reader.read(0, 0).key == "s0_00000"  # after close: read directly
    assert len(store.reads) == 1
    reader.prefetch(*refs([(1, 3)]))  # and usable again, with a new pool
    assert reader._ahead is not None and reader._ahead.service._pool is not pool
    assert reader.read(1, 3).key == "s1_00003"
    reader.close()


def test_a_forked_child_never_uses_the_parents_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store()
    store.gate.clear()  # the parent's requests stay in flight
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs([(0, 0), (1, 0)]))
    assert reader._ahead is not None
    parent_pool = reader._ahead.service._pool
    real = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real + 1)  # as in a forked child
    assert reader._ahead.take("shard_0.tar", 0, 10) is None  # the parent's buffers are gone
    reader.prefetch(*refs([(2, 0)]))
    assert reader._ahead.service._pool is not parent_pool
    store.gate.set()
    assert reader.read(2, 0).key == "s2_00000"
    assert reader.read(0, 0).key == "s0_00000"
    reader.close()
    monkeypatch.undo()
    assert parent_pool is not None
    parent_pool.shutdown(wait=True)


def test_stale_buffers_make_room_for_new_work() -> None:
    store = make_store(shards=2, per_shard=10)
    ahead = Prefetcher(store, budget=1, threads=2)
    reader = ShardReader(store, shard_names(store))
    reader._ahead = ahead
    reader.prefetch(*refs([(0, 0)]))  # announced, never read (its stream went away)
    for chunk in ahead.service._live:
        assert chunk.future is not None
        chunk.future.result()
    for _ in range(read_ahead_module._STALE_READS + 100):
        reader.read(1, 0)  # unannounced reads tick the clock
    reader.prefetch(*refs([(1, 1)]))
    assert ahead.requests == 2  # the stale buffer was dropped to fetch the new one at once
    assert reader.read(1, 1).key == "s1_00001"
    reader.close()


def test_budget_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "1048576")
    assert Prefetcher(make_store()).budget == 1 << 20
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "lots")
    with pytest.raises(ConfigError, match="STOKER_PREFETCH_BYTES"):
        Prefetcher(make_store()).want([("shard_0.tar", 0, 10)])
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "0")
    store = make_store()
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs([(0, 0), (0, 1)]))
    assert store.reads == []  # read-ahead off: every read is direct
    assert reader.read(0, 1).key == "s0_00001"
    assert len(store.reads) == 1
    reader.close()


def test_split_head_keeps_every_sample_once_per_mention() -> None:
    request = plan_requests([("a", 0, 10), ("a", 0, 10), ("a", 10, 30), ("a", 30, 35)],
                            gap=0, cap=100)[0]  # fmt: skip
    head, rest = split_head(request, 15)
    assert (head.start, head.end, head.samples) == (0, 10, [(0, 10), (0, 10)])
    assert (rest.start, rest.end, rest.samples) == (10, 35, [(10, 30), (30, 35)])
    assert split_head(request, 1)[0].samples == [(0, 10), (0, 10)]  # one sample at least
    assert split_head(request, 100) == [request]


def test_only_the_first_cold_request_is_small() -> None:
    store = make_store(shards=1, per_shard=40, size=100_000)  # ~4 MB in one shard
    ahead = Prefetcher(store, threads=2)
    reader = ShardReader(store, shard_names(store))
    reader._ahead = ahead
    reader.prefetch(*refs([(0, i) for i in range(30)]))  # nothing coming yet: first <= 1 MiB
    reader.prefetch(*refs([(0, i) for i in range(30, 40)]))  # warm: one request
    assert ahead.requests == 2 + 1  # ten samples of ~100 kB, then the other twenty in one
    assert sorted(size for _, _, size in store.reads)[0] <= FIRST_REQUEST
    assert all(reader.read(0, i).key == f"s0_{i:05d}" for i in range(40))
    reader.close()


def test_the_lead_fetches_ahead_as_the_readers_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_ahead_module, "FIRST_LEAD", 1)  # one request ahead at a time
    store = make_store(shards=4, per_shard=40)
    pairs = all_pairs(store)  # shard by shard: one request each, needed in turn
    expected = direct(store, pairs)
    store.reads.clear()
    reader = ShardReader(store, shard_names(store))
    reader._ahead = Prefetcher(store, budget=1 << 30, threads=2)
    reader.prefetch(*refs(pairs))
    service = reader._ahead.service
    # A cold start fetches what the first 64 reads need at once (shards 0 and 1), no more.
    assert service.requests == 2
    got = [reader.read(s, i).parts for s, i in pairs[:41]]
    assert service.requests == 3  # shard 1 was taken from: shard 2 is fetched
    assert service.lead == 1  # no read waited for a request the lead held back
    got += [reader.read(s, i).parts for s, i in pairs[41:80]]
    got.append(reader.read(3, 0).parts)  # shard 3, before its turn: fetched at once ...
    assert service.lead == 2  # ... and the lead grows
    got += [reader.read(s, i).parts for s, i in pairs[80:] if (s, i) != (3, 0)]
    assert got == [*expected[:80], expected[120], *expected[80:120], *expected[121:]]
    assert len(store.reads) == 4  # nothing read directly
    reader.close()


def test_readers_of_a_process_share_one_pool_and_budget_and_take_turns() -> None:
    a, b = make_store(shards=2, per_shard=10), make_store(shards=2, per_shard=10)
    readers = [ShardReader(store, shard_names(store)) for store in (a, b)]
    shard_size = int(readers[0].offsets(0)[-1])
    previous = activate(LoaderOptions(prefetch_bytes=shard_size, prefetch_threads=2))
    try:
        for reader in readers:
            reader.prefetch(*refs(all_pairs(a, per_shard=10)))
    finally:
        activate(previous)
    service = readers[0]._ahead.service if readers[0]._ahead else None
    assert service is not None and readers[1]._ahead and readers[1]._ahead.service is service
    assert (service.budget, service.threads, service.readers) == (shard_size, 2, 2)
    assert {p for p, _, _ in a.reads} == {"shard_0.tar"} and b.reads == []  # b waits for room
    for i in range(10):
        readers[0].read(0, i)  # room is made: the readers take turns, b first
    tokens = [reader._ahead._token if reader._ahead else None for reader in readers]
    of_b = [c for c in service._live if c.reader == tokens[1]]
    of_a = [c for c in service._live if c.reader == tokens[0]]  # shard 0 was all read
    assert of_b and len(of_b) - 1 <= len(of_a) <= len(of_b)  # submitted b, a, b, ...
    assert {c.request.name for c in of_a} == {"shard_1.tar"}
    assert service.peak_bytes <= shard_size
    for s, i in all_pairs(a, per_shard=10):
        readers[1].read(s, i)
    for i in range(10):
        readers[0].read(1, i)
    for reader in readers:
        reader.close()
    assert service.readers == 0 and service._pool is None  # the last reader shut it down


class GatedStore(MemStore):
    """A :class:`MemStore` whose reads of the shards in :attr:`held` wait for :attr:`release`."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.held: set[str] = set()
        self.release = threading.Event()

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if path in self.held:
            self.release.wait(10)
        return super().read_range(path, offset, size)


def received(ahead: Prefetcher, name: str) -> None:
    """Wait until ``name``'s requests (those announced) are answered."""
    for chunk in list(ahead.service._live):
        if chunk.request.name == name and chunk.future is not None:
            chunk.future.exception(10)


def test_take_held_gives_received_samples_only_and_never_waits() -> None:
    store = make_store(shards=3, per_shard=10)
    gated = GatedStore(store.files)
    gated.held.add("shard_1.tar")
    gated.failing.add("shard_2.tar")
    reader = ShardReader(gated, shard_names(gated))
    ahead = reader._ahead = Prefetcher(gated, budget=1 << 20, threads=3)
    pairs = [(0, i) for i in range(5)] + [(1, 0), (0, 5), (2, 0)]
    expected = direct(store, pairs)
    reader.prefetch(*refs(pairs))
    keys = [(shard_names(gated)[s], *reader.byte_range(s, i)) for s, i in pairs]
    received(ahead, "shard_0.tar")
    received(ahead, "shard_2.tar")
    hits = read_ahead_module.TAKEN["hits"]
    # Shard 0's request is here; shard 1's is not (the run stops there, without waiting).
    got = ahead.take_held(keys)
    assert [f"s0_{i:05d}.txt".encode() in data for i, data in enumerate(got)] == [True] * 5
    parsed = [
        reader._sample(data, name, index, start, end).parts
        for data, (name, start, end), (_, index) in zip(got, keys, pairs, strict=False)
    ]
    assert parsed == expected[:5]
    assert read_ahead_module.TAKEN["hits"] == hits + 5
    assert ahead.take_held(keys[5:]) == []
    gated.release.set()
    received(ahead, "shard_1.tar")
    assert len(ahead.take_held(keys[5:])) == 2  # now (1, 0) and (0, 5); (2, 0)'s GET failed
    assert ahead.take_held(keys[7:]) == []  # a failed request: left for read() to report
    with pytest.raises(StorageError, match="GET failed"):
        reader.read(2, 0)
    assert ahead.take_held([("shard_0.tar", 0, 10)]) == []  # all its reads were taken: let go
    assert ahead.held_bytes == 0
    reader.close()


def test_a_remote_run_reads_its_first_sample_and_then_what_was_received() -> None:
    store = make_store(shards=2, per_shard=10)
    gated = GatedStore(store.files)
    gated.held.add("shard_1.tar")
    reader = ShardReader(gated, shard_names(gated))
    assert not reader.local
    reader._ahead = Prefetcher(gated, budget=1 << 20, threads=2)
    pairs = [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1)]
    expected = direct(store, pairs)
    reader.prefetch(*refs(pairs))
    raws, error = reader.read_run([s for s, _ in pairs], [i for _, i in pairs])
    assert error is None and [raw.parts for raw in raws] == expected[:2]  # stops at shard 1
    gated.release.set()
    raws, error = reader.read_run([s for s, _ in pairs[2:]], [i for _, i in pairs[2:]])
    assert error is None and [raw.parts for raw in raws] == expected[2:]  # waits for the first
    assert raws == one_by_one(store, pairs[2:])  # keys, shards and offsets too
    assert len(gated.reads) == 2  # one request per shard, nothing read directly
    reader.close()


def one_by_one(store: MemStore, pairs: list[tuple[int, int]]) -> list[object]:
    reader = ShardReader(store, shard_names(store))
    return [reader.read(s, i) for s, i in pairs]


def test_a_remote_run_reports_its_first_sample_as_read_does() -> None:
    store = make_store(shards=2, per_shard=10)
    store.failing.add("shard_1.tar")
    reader = ShardReader(store, shard_names(store))
    reader.prefetch(*refs([(1, 0), (0, 0)]))
    raws, error = reader.read_run([1, 0], [0, 0])
    assert raws == [] and isinstance(error, StorageError) and "GET failed" in str(error)
    raws, error = reader.read_run([0, 0], [0, 99])  # outside the index: read() says so
    assert [raw.key for raw in raws] == ["s0_00000"] and error is None
    raws, error = reader.read_run([0], [99])
    assert raws == [] and error is not None and "outside the shard's index" in str(error)
    reader.close()
