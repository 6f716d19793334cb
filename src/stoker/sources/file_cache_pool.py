"""``FileStoreCachePool``: fetch the files cookers ask for in the background, onto local disk.

``pool.get_lazy(store, name)`` queues a read on a thread pool that writes the file into a private
cache folder (within a size and count limit: a fetch waits until earlier files are consumed);
``lazy.get(sample)`` then reads it from there (or waits for the fetch, or reads directly if it has
not started or waits for room). Lazies for the same file share one fetch, counted by reference;
the cached file goes when the last reference has read it or is garbage-collected. ``method="raw"``
caches bytes and decodes on ``get``; ``"pickle"`` caches the decoded object. Same constructor and
behaviour as Energon's. A pool given to ``get_loader(..., cache_pool=pool)`` travels into each
dataloader worker, which gets its own cache folder and threads (after fork, or when unpickled).

Example:
    >>> from stoker.sources.aux import SystemFileStore
    >>> pool = FileStoreCachePool(parent_cache_dir=Path("."), max_cache_size_gbytes=1)
    >>> lazy = pool.get_lazy(SystemFileStore("raw"), "000001.txt")
    >>> lazy.get()
    b'a red square'
    >>> pool.close()
"""

from __future__ import annotations

import hashlib
import multiprocessing.util
import os
import pickle
import shutil
import tempfile
import threading
import uuid
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from stoker.model.cache_pool import CachePool, Lazy
from stoker.model.samples import SourceInfo
from stoker.sources.aux import FileStore, add_source_info

__all__ = ["CacheFileLazy", "FileCacheLazy", "FileStoreCachePool"]

T = TypeVar("T")
_Key = tuple[str, str]


class _PendingTask:
    """One background fetch of ``(ds, fname)``, shared by every lazy for that file."""

    def __init__(self, ds: FileStore, fname: str) -> None:
        self.ds, self.fname = ds, fname
        self.send_to_cache_future: Future[bool] = Future()
        self.refcount = 1
        self.data_size = 0
        #: A reader waits for this file: stop waiting for room and let it read directly.
        self.require_data_now = False
        self.cache_path: Path | None = None
        self.source_info: SourceInfo | None = None


class FileCacheLazy(Lazy[T]):
    """A file being fetched into the pool's cache; ``get`` returns it (once fetched)."""

    def __init__(self, ds: FileStore, fname: str, pool: FileStoreCachePool, entry: _PendingTask):
        super().__init__(ds, fname, pool)
        self.pool: FileStoreCachePool = pool
        self.entry = entry
        self._data: tuple[T, SourceInfo] | None = None

    def get(self, sample: Any = None) -> T:
        if self._data is None:
            self._data = self.pool._get_data(self.entry.ds, self.fname, self.entry)
        add_source_info(sample, self._data[1])
        return self._data[0]

    def __del__(self) -> None:
        if getattr(self, "_data", 1) is None:  # never read: give up this reference
            with self.pool._lock:
                self.pool._release(self.pool._key(self.entry.ds, self.fname))


class CacheFileLazy(Lazy[T]):
    """An object ``to_cache`` pickled into the cache folder; the file goes after ``get``."""

    def __init__(self, fname: str, pool: FileStoreCachePool, cache_path: Path) -> None:
        super().__init__(None, fname, pool)
        self.cache_path: Path | None = cache_path
        self._data: T | None = None
        self._loaded = False

    def get(self, sample: Any = None) -> T:
        if not self._loaded:
            path = self.cache_path
            if path is None:
                raise ValueError(f"the cached object {self.fname!r} is gone.")
            with open(path, "rb") as f:
                self._data = pickle.load(f)
            self._loaded, self.cache_path = True, None
            path.unlink(missing_ok=True)
        return self._data  # type: ignore[return-value]

    def __del__(self) -> None:
        path = getattr(self, "cache_path", None)
        if path is not None:
            path.unlink(missing_ok=True)

    def __hash__(self) -> int:
        return hash((self.fname, self.cache_path))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CacheFileLazy)
            and self.fname == other.fname
            and self.cache_path == other.cache_path
        )


class FileStoreCachePool(CachePool):
    """Background fetches onto a local cache folder, bounded in size and file count.

    Args:
        parent_cache_dir: Where the pool makes its private folder (``cache_<random>``); default
            the system's temporary folder.
        num_workers: Threads that fetch files.
        max_cache_size_gbytes: Most bytes in the cache; fetches wait until there is room.
        max_cache_count: Most files in the cache.
        method: ``"raw"`` caches the bytes (decoded on ``get``); ``"pickle"`` the decoded data.
    """

    def __init__(
        self,
        *,
        parent_cache_dir: Path | str | None = None,
        num_workers: int = 8,
        max_cache_size_gbytes: float = 1024,
        max_cache_count: int = 10_000_000,
        method: Literal["raw", "pickle"] = "raw",
    ) -> None:
        if method not in ("raw", "pickle"):
            raise ValueError(
                f"FileStoreCachePool: method must be 'raw' or 'pickle', not {method!r}."
            )
        if num_workers < 1:
            raise ValueError(f"FileStoreCachePool: {num_workers=} must be at least 1.")
        self.parent_cache_dir = Path(parent_cache_dir or tempfile.gettempdir())
        self.num_workers = num_workers
        self.max_cache_size = int(max_cache_size_gbytes * 1024**3)
        self.max_cache_count = max_cache_count
        self.method = method
        self._start()
        _LIVE.add(self)

    def _start(self, make_dir: bool = True) -> None:
        """Fresh per-process state: its own folder, lock, threads and bookkeeping.

        The folder (and what is left in it) goes when the pool does, or when the process exits.
        """
        self.cache_dir = (self.parent_cache_dir / f"cache_{uuid.uuid4().hex[:16]}").resolve()
        self._dir_owner: int | None = None
        if make_dir:
            self._ensure_dir()
        self._lock = threading.RLock()
        self._cache_space_available = threading.Condition(self._lock)
        self._worker_pool: ThreadPoolExecutor | None = None
        self._pending_tasks: dict[_Key, _PendingTask] = {}
        self.current_cache_size = 0
        self.current_cache_count = 0
        self._shutting_down = False

    def __getstate__(self) -> dict[str, Any]:
        keep = ("parent_cache_dir", "num_workers", "max_cache_size", "max_cache_count", "method")
        return {k: self.__dict__[k] for k in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start()
        _LIVE.add(self)

    def __repr__(self) -> str:
        return (
            f"FileStoreCachePool(cache_dir={self.cache_dir}, max_cache_size={self.max_cache_size}, "
            f"max_cache_count={self.max_cache_count}, method={self.method}, "
            f"current_cache_size={self.current_cache_size}, "
            f"current_cache_count={self.current_cache_count})"
        )

    __str__ = __repr__

    # -- the CachePool interface ------------------------------------------------------------
    def get(self, ds: FileStore, fname: str, sample: Any = None) -> Any:
        """Read now, bypassing the cache."""
        return ds.get(fname, sample)

    def get_lazy(self, ds: FileStore, fname: str) -> FileCacheLazy[Any]:
        """Queue a background fetch (shared with earlier requests for the same file)."""
        key = self._key(ds, fname)
        with self._lock:
            if self._shutting_down:
                raise RuntimeError("FileStoreCachePool: get_lazy after close().")
            entry = self._pending_tasks.get(key)
            if entry is not None:
                entry.refcount += 1
            else:
                entry = self._pending_tasks[key] = _PendingTask(ds, fname)
                entry.send_to_cache_future = self._submit(ds, fname, entry)
        return FileCacheLazy(ds, fname, self, entry)

    def to_cache(self, data: T, name: str) -> CacheFileLazy[T]:
        """Pickle ``data`` into the cache folder; the lazy loads it back (once)."""
        path = self.cache_dir / str(uuid.uuid4())
        self._write_to_cache(path, pickle.dumps(data))
        return CacheFileLazy(name, self, path)

    def close(self) -> None:
        """Cancel queued fetches, wait for running ones, drop the cached files."""
        with self._lock:
            self._shutting_down = True
            for entry in self._pending_tasks.values():
                entry.send_to_cache_future.cancel()
            self._cache_space_available.notify_all()
        if self._worker_pool is not None:
            self._worker_pool.shutdown(wait=True)
        with self._lock:
            self._pending_tasks.clear()

    # -- machinery --------------------------------------------------------------------------
    @staticmethod
    def _key(ds: FileStore, fname: str) -> _Key:
        name = getattr(ds, "_cache_name", None)
        return ds.get_path(), name(fname) if name is not None else fname

    def _submit(self, ds: FileStore, fname: str, entry: _PendingTask) -> Future[bool]:
        if self._worker_pool is None:
            self._worker_pool = ThreadPoolExecutor(self.num_workers, "CacheWorker")
        return self._worker_pool.submit(self._cache_out_task, ds, fname, entry)

    def _get_data(self, ds: FileStore, fname: str, entry: _PendingTask) -> tuple[Any, SourceInfo]:
        """The data of ``entry`` for one reference: from the cache, or directly.

        A fetch not yet started is cancelled and the file read directly; one running (or waiting
        for room) is awaited, told to stop waiting, and falls back to a direct read if it did
        not cache. If other references remain and nothing was cached, the fetch is queued again.
        """
        key = self._key(ds, fname)
        with self._lock:
            cached = False
            try:
                if entry.send_to_cache_future.cancel():
                    try:
                        return ds[fname]
                    finally:
                        self._release(key)
                entry.require_data_now = True
                self._cache_space_available.notify_all()
                self._lock.release()
                cached = True  # a failed fetch raises to this reader and stays for the others
                try:
                    cached = entry.send_to_cache_future.result()
                    return self._read_from_cache(entry) if cached else ds[fname]
                finally:
                    self._lock.acquire()
                    entry.require_data_now = False
                    self._release(key)
            finally:
                if entry.refcount > 0 and not cached and not self._shutting_down:
                    entry.send_to_cache_future = self._submit(ds, fname, entry)

    def _cache_out_task(self, ds: FileStore, fname: str, entry: _PendingTask) -> bool:
        """Read the file, wait for room, write it to the cache; False if it did not cache."""
        with self._lock:
            if self._shutting_down:
                return False
        if self.method == "raw":
            data, entry.source_info = ds._get_raw(fname)
        else:
            decoded, entry.source_info = ds[fname]
            data = pickle.dumps(decoded)
        with self._lock:
            entry.data_size = size = len(data)
            while (
                self.current_cache_count + 1 > self.max_cache_count
                or self.current_cache_size + size > self.max_cache_size
            ):
                self._cache_space_available.wait()
                if entry.require_data_now or self._shutting_down:
                    return False
            self.current_cache_size += size
            self.current_cache_count += 1
            if self._shutting_down or entry.refcount <= 0:
                self._unreserve(size)
                return False
        path = self.cache_dir / _file_name(ds, fname)
        try:
            self._write_to_cache(path, data)
        except BaseException:
            with self._lock:
                self._unreserve(size)
            raise
        with self._lock:
            entry.cache_path = path
        return True

    def _unreserve(self, size: int) -> None:
        self.current_cache_size -= size
        self.current_cache_count -= 1
        self._cache_space_available.notify_all()

    def _ensure_dir(self) -> None:
        """Make this process's folder, to be removed when the pool goes or the process exits."""
        if self._dir_owner == os.getpid():
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._dir_owner = os.getpid()
        multiprocessing.util.Finalize(
            self, _remove_dir, args=(str(self.cache_dir), self._dir_owner), exitpriority=0
        )

    def _write_to_cache(self, path: Path, data: bytes) -> None:
        self._ensure_dir()
        with open(path, "wb") as f:
            f.write(data)

    def _read_from_cache(self, entry: _PendingTask) -> tuple[Any, SourceInfo]:
        if entry.cache_path is None or entry.source_info is None:
            raise RuntimeError(f"internal: {entry.fname!r} is not in the cache.")
        with open(entry.cache_path, "rb") as f:
            if self.method == "pickle":
                return pickle.load(f), entry.source_info
            raw = f.read()
        decode = getattr(entry.ds, "_decode_raw", None)
        data = decode(raw, fname=entry.fname) if decode is not None else raw
        return data, entry.source_info

    def _release(self, key: _Key) -> None:
        """Drop one reference to ``key`` (lock held); the last one removes the cached file."""
        entry = self._pending_tasks.get(key)
        if entry is None:
            return
        entry.refcount -= 1
        if entry.refcount > 0:
            return
        del self._pending_tasks[key]
        if entry.cache_path is not None:
            entry.cache_path.unlink(missing_ok=True)
            entry.cache_path = None
            self._unreserve(entry.data_size)

    def _after_fork_in_child(self) -> None:
        """A forked worker starts with its own folder and threads (the parent's are not its)."""
        self._start(make_dir=False)


def _file_name(ds: FileStore, fname: str) -> str:
    ds_hash = hashlib.md5(ds.get_path().encode("utf-8")).hexdigest()
    return f"{ds_hash}_{hashlib.md5(fname.encode('utf-8')).hexdigest()}"


def _remove_dir(path: str, owner: int) -> None:
    if os.getpid() == owner:  # never a parent's folder from a forked child
        shutil.rmtree(path, ignore_errors=True)


_LIVE: weakref.WeakSet[FileStoreCachePool] = weakref.WeakSet()


def _reset_pools_in_child() -> None:
    for pool in list(_LIVE):
        pool._after_fork_in_child()


os.register_at_fork(after_in_child=_reset_pools_in_child)
