"""Energon's cache-pool API: background fetches onto a bounded local cache, shared references,
direct reads when a fetch cannot start, raw and pickle methods, ``to_cache``, and the simple pools.

A loader with ``cache_pool=`` in real workers: tests/integration/test_cache_pool_workers.py.
"""

from __future__ import annotations

import gc
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    CachePool,
    DecodeFileStore,
    DirectLazy,
    FileCacheLazy,
    FileStore,
    FileStoreCachePool,
    FileStoreDecoder,
    MockLazy,
    NoCachePool,
    SampleDecoder,
    SourceInfo,
    SystemFileStore,
)
from stoker.model.cache_pool import current_cache_pool, use_cache_pool


class DictStore(FileStore):
    """Files from a dict; counts reads, and can hold reads back until released."""

    def __init__(self, files: dict[str, bytes], path: str = "dict-store") -> None:
        self.files, self.path, self.reads = files, path, 0
        self.gate = threading.Event()
        self.gate.set()

    def __getitem__(self, key: str) -> tuple[bytes, SourceInfo]:
        self.gate.wait(10)
        self.reads += 1
        return self.files[key], SourceInfo(
            dataset_path=self.path, index=key, shard_name=None, file_names=(key,)
        )

    def get_path(self) -> str:
        return self.path


class Shout(FileStoreDecoder):
    def decode(self, fname: str, data: bytes) -> str:
        return f"{fname}={data.decode().upper()}"


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[FileStoreCachePool]:
    p = FileStoreCachePool(parent_cache_dir=tmp_path)
    yield p
    p.close()


def cached_files(pool: FileStoreCachePool) -> list[Path]:
    return sorted(pool.cache_dir.glob("*")) if pool.cache_dir.exists() else []


def wait_until(cond: Callable[[], bool], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def test_a_lazy_is_fetched_to_disk_then_read_from_there(
    pool: FileStoreCachePool, tmp_path: Path
) -> None:
    store = DictStore({"a.bin": b"payload"})
    lazy = pool.get_lazy(store, "a.bin")
    assert isinstance(lazy, FileCacheLazy)
    assert lazy.entry.send_to_cache_future.result(5) is True
    assert pool.cache_dir.parent == tmp_path and len(cached_files(pool)) == 1
    assert cached_files(pool)[0].read_bytes() == b"payload"
    assert (pool.current_cache_count, pool.current_cache_size) == (1, 7)
    sample: dict[str, Any] = {"__sources__": ()}
    assert lazy.get(sample) == b"payload" and lazy.get() == b"payload"
    assert sample["__sources__"] == (
        SourceInfo(
            dataset_path="dict-store", index="a.bin", shard_name=None, file_names=("a.bin",)
        ),
    )
    assert cached_files(pool) == [] and pool.current_cache_count == 0  # the last reader freed it
    assert store.reads == 1


def test_references_to_one_file_share_one_fetch(pool: FileStoreCachePool) -> None:
    store = DictStore({"a": b"1"})
    first, second = pool.get_lazy(store, "a"), pool.get_lazy(store, "a")
    assert first.entry is second.entry and first.entry.refcount == 2
    assert first == second and len({first, second}) == 1
    first.entry.send_to_cache_future.result(5)
    assert first.get() == b"1" and first.entry.refcount == 1 and len(cached_files(pool)) == 1
    assert second.get() == b"1" and cached_files(pool) == []
    assert store.reads == 1


def test_an_unread_lazy_frees_its_file_when_collected(pool: FileStoreCachePool) -> None:
    lazy: FileCacheLazy[Any] | None = pool.get_lazy(DictStore({"a": b"x" * 100}), "a")
    assert lazy is not None
    lazy.entry.send_to_cache_future.result(5)
    assert len(cached_files(pool)) == 1
    lazy = None
    gc.collect()
    assert cached_files(pool) == [] and pool.current_cache_size == 0


def test_fetches_wait_for_room_and_a_reader_does_not_wait_for_them(tmp_path: Path) -> None:
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1, max_cache_count=1)
    try:
        store = DictStore({"a": b"aa", "b": b"bb", "c": b"cc"})
        a, b, b2 = pool.get_lazy(store, "a"), pool.get_lazy(store, "b"), pool.get_lazy(store, "b")
        a.entry.send_to_cache_future.result(5)
        wait_until(lambda: b.entry.send_to_cache_future.running())
        time.sleep(0.1)
        assert not b.entry.send_to_cache_future.done()  # the cache is full: b waits for room
        assert len(cached_files(pool)) == 1
        # Reading b now reads it directly; the remaining reference fetches it again later.
        assert b.get() == b"bb" and b.entry.refcount == 1
        assert a.get() == b"aa"  # frees the room: b's second fetch goes in
        wait_until(lambda: b2.entry.send_to_cache_future.done())
        assert b2.entry.send_to_cache_future.result() is True and len(cached_files(pool)) == 1
        assert b2.get() == b"bb" and cached_files(pool) == []
        assert store.reads == 4  # a once, b for the waiting fetch, the direct read, the refetch
    finally:
        pool.close()


def test_a_fetch_that_has_not_started_is_cancelled_and_read_directly(tmp_path: Path) -> None:
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1)
    try:
        slow, quick = DictStore({"s": b"slow"}, "slow"), DictStore({"q": b"quick"}, "quick")
        slow.gate.clear()  # the only thread is busy with this one
        held = pool.get_lazy(slow, "s")
        queued = pool.get_lazy(quick, "q")
        assert queued.get() == b"quick" and quick.reads == 1  # cancelled, read directly
        assert queued.entry.refcount == 0
        slow.gate.set()
        assert held.get() == b"slow"
    finally:
        pool.close()


def test_size_limit_in_bytes(tmp_path: Path) -> None:
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=2, max_cache_size_gbytes=1e-9)
    try:
        assert pool.max_cache_size == 1
        lazy = pool.get_lazy(DictStore({"big": b"too large"}), "big")
        deadline = time.monotonic() + 30
        while lazy.entry.data_size != len(b"too large"):  # the fetch has read the file
            assert time.monotonic() < deadline, "the fetch never read the file"
            time.sleep(0.01)
        # It set the size holding the pool's lock, which it lets go only to wait for room: holding
        # the lock now, the fetch is waiting, or it has reserved the room it should not have.
        with pool._lock:
            assert pool.current_cache_size == 0 and pool.current_cache_count == 0
            assert not lazy.entry.send_to_cache_future.done()
        assert cached_files(pool) == []
        assert lazy.get() == b"too large"
    finally:
        pool.close()


@pytest.mark.parametrize("method", ["raw", "pickle"])
def test_decoded_stores_decode_on_get_raw_or_cache_decoded_pickle(
    tmp_path: Path, method: str
) -> None:
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, method=method)  # type: ignore[arg-type]
    try:
        decoded = DecodeFileStore(DictStore({"x.txt": b"hi"}), decoder=Shout())
        lazy = pool.get_lazy(decoded, "x.txt")
        lazy.entry.send_to_cache_future.result(5)
        on_disk = cached_files(pool)[0].read_bytes()
        assert on_disk == (b"hi" if method == "raw" else pickle.dumps("x.txt=HI"))
        sample: dict[str, Any] = {"__sources__": ()}
        assert lazy.get(sample) == "x.txt=HI"
        assert sample["__sources__"][0].file_names == ("x.txt",)
        assert pool.get(decoded, "x.txt") == "x.txt=HI"  # get bypasses the cache
    finally:
        pool.close()


def test_to_cache_round_trips_and_cleans_up(pool: FileStoreCachePool) -> None:
    lazy = pool.to_cache({"tokens": [1, 2, 3]}, "encoded-0")
    path = lazy.cache_path
    assert path is not None and path.parent == pool.cache_dir and path.is_file()
    assert lazy.get() == {"tokens": [1, 2, 3]} and lazy.get() == {"tokens": [1, 2, 3]}
    assert lazy.cache_path is None and not path.exists()
    unread = pool.to_cache((1, "x"), "encoded-1")
    unread_path = unread.cache_path
    assert unread_path is not None and unread_path.is_file()
    del unread
    gc.collect()
    assert not unread_path.exists()


def test_pickled_pool_is_a_fresh_pool_with_the_same_limits(pool: FileStoreCachePool) -> None:
    pool.get_lazy(DictStore({"a": b"1"}), "a").entry.send_to_cache_future.result(5)
    copy = pickle.loads(pickle.dumps(pool))
    try:
        assert (copy.max_cache_size, copy.max_cache_count, copy.method, copy.num_workers) == (
            pool.max_cache_size, pool.max_cache_count, pool.method, pool.num_workers,
        )  # fmt: skip
        assert copy.cache_dir != pool.cache_dir and copy.current_cache_count == 0
        assert copy.get_lazy(DictStore({"b": b"2"}), "b").get() == b"2"
    finally:
        copy.close()


def test_close_cancels_queued_fetches_and_refuses_new_ones(tmp_path: Path) -> None:
    pool = FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=1)
    slow = DictStore({"s": b"s"})
    slow.gate.clear()
    running = pool.get_lazy(slow, "s")
    queued = pool.get_lazy(DictStore({"q": b"q"}, "other"), "q")
    threading.Timer(0.2, slow.gate.set).start()
    pool.close()
    assert queued.entry.send_to_cache_future.cancelled()
    assert running.entry.send_to_cache_future.done()
    with pytest.raises(RuntimeError, match="after close"):
        pool.get_lazy(slow, "s")


def test_invalid_arguments_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="method"):
        FileStoreCachePool(parent_cache_dir=tmp_path, method="zip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_workers"):
        FileStoreCachePool(parent_cache_dir=tmp_path, num_workers=0)


def test_system_file_store_with_a_pool_and_absolute_names(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(b"png!")
    pool = FileStoreCachePool(parent_cache_dir=tmp_path / "cache")
    try:
        assert pool.get_lazy(SystemFileStore(tmp_path / "img"), "a.png").get() == b"png!"
        assert SystemFileStore().get(str(tmp_path / "img" / "a.png")) == b"png!"
    finally:
        pool.close()


def test_no_cache_pool_and_the_simple_lazies() -> None:
    store = DictStore({"a": b"1"})
    pool = NoCachePool()
    lazy = pool.get_lazy(store, "a")
    assert isinstance(lazy, DirectLazy) and store.reads == 0
    sample: dict[str, Any] = {}
    assert lazy.get(sample) == b"1" and lazy.get() == b"1" and store.reads == 1
    assert sample["__sources__"][0].dataset_path == "dict-store"
    assert lazy == DirectLazy(store, "a") and lazy != DirectLazy(DictStore({}), "a")
    held = pool.to_cache([1, 2], "n")
    assert isinstance(held, MockLazy) and held.get() == [1, 2]
    mock = MockLazy("name", str.upper)
    assert mock.get() == "NAME" and mock == MockLazy("name", str.upper)
    assert isinstance(pool, CachePool) and pool.get(store, "a") == b"1"


def test_current_pool_defaults_to_reading_directly(tmp_path: Path) -> None:
    assert isinstance(current_cache_pool(), NoCachePool)
    pool = FileStoreCachePool(parent_cache_dir=tmp_path)
    try:
        use_cache_pool(pool)
        assert current_cache_pool() is pool
    finally:
        use_cache_pool(None)
        pool.close()
    assert isinstance(current_cache_pool(), NoCachePool)


def test_stokers_sample_decoder_decodes_cached_raw_files_by_extension(
    pool: FileStoreCachePool,
) -> None:
    files = {"a.txt": b"text", "b.json": b'{"k": [1, 2]}', "c.cls": b"7"}
    store = DecodeFileStore(DictStore(files), decoder=SampleDecoder())
    lazies = [pool.get_lazy(store, name) for name in files]
    for lazy in lazies:
        assert lazy.entry.send_to_cache_future.result(5) is True
    assert [lazy.get() for lazy in lazies] == ["text", {"k": [1, 2]}, 7]
