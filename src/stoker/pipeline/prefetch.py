"""Read-ahead for remote stores: the samples the plan says come next, fetched in coalesced ranges.

A :class:`Prefetcher` is told which samples (shard, byte range) are read next, in the order they
will be read. It merges the ranges of each shard that are closer than ``gap`` bytes into requests
of at most ``cap`` bytes, and fetches them with ``store.read_range`` on a small thread pool, in the
order they are first needed, while the bytes held (in flight or received, not yet read) stay
within a budget (``STOKER_PREFETCH_BYTES``, 256 MiB by default; 0 turns read-ahead off).
:meth:`Prefetcher.take` hands out a sample's bytes (waiting for its request if it is in flight),
and a request's buffer is dropped once all its samples were taken. A sample it does not know is
the caller's to read directly, so a skipped or unplanned read is never wrong, only slower.

The pool and the buffers belong to one process: a forked child starts afresh (a pool made in
another process is never used), and :meth:`Prefetcher.close` shuts the pool down.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stoker.errors import ConfigError
from stoker.storage import Store

DEFAULT_BUDGET = 256 << 20
DEFAULT_THREADS = 8
#: Ranges of one shard closer than this are fetched in one request. The bytes between are read
#: too, and samples announced later that lie in them are taken from that request. (A request
#: costs milliseconds of client CPU and a round trip: about as much as a MiB of transfer.)
REMOTE_GAP = 1 << 20
#: The largest request made by merging ranges (one sample larger than this is one request).
MAX_REQUEST = 8 << 20
#: The largest first request when nothing is buffered yet (the first samples are awaited).
FIRST_REQUEST = 1 << 20
#: A received request untouched for this many reads (at least) may be dropped to make room.
_STALE_READS = 1024

SampleKey = tuple[str, int, int]
T = TypeVar("T")
R = TypeVar("R")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        parsed = int(value)
    except ValueError:
        raise ConfigError(
            f"{name}={value!r} is not a whole number.", hint=f"E.g. {name}={default}."
        ) from None
    if parsed < 0:
        raise ConfigError(f"{name} must be >= 0, not {parsed}.", hint=f"E.g. {name}={default}.")
    return parsed


def budget_from_env() -> int:
    """Bytes a process may hold read ahead, per reader (``STOKER_PREFETCH_BYTES``; 0: off)."""
    return _env_int("STOKER_PREFETCH_BYTES", DEFAULT_BUDGET)


def threads_from_env() -> int:
    """Concurrent requests per reader (``STOKER_PREFETCH_THREADS``)."""
    return max(1, _env_int("STOKER_PREFETCH_THREADS", DEFAULT_THREADS))


@dataclass(eq=False)
class Request:
    """One ranged read ``[start, end)`` of shard ``name`` covering ``samples``."""

    name: str
    start: int
    end: int
    #: Position (in the order given) of the first sample that needs it.
    first: int
    samples: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_requests(samples: Sequence[SampleKey], *, gap: int, cap: int) -> list[Request]:
    """Coalesced requests for ``samples`` (shard, start, end) in read order, by first need.

    Ranges of one shard are merged when the hole between them is at most ``gap`` bytes and the
    merged request stays within ``cap`` bytes. A sample listed twice is in one request twice.
    """
    by_name: dict[str, list[tuple[int, int, int]]] = {}
    for position, (name, start, end) in enumerate(samples):
        by_name.setdefault(name, []).append((start, end, position))
    requests: list[Request] = []
    for name, items in by_name.items():
        items.sort()
        current: Request | None = None
        for start, end, position in items:
            if (
                current is not None
                and start - current.end <= gap
                and max(end, current.end) - current.start <= cap
            ):
                current.end = max(current.end, end)
                current.first = min(current.first, position)
            else:
                current = Request(name, start, end, position)
                requests.append(current)
            current.samples.append((start, end))
    requests.sort(key=lambda r: r.first)
    return requests


def split_head(request: Request, limit: int) -> list[Request]:
    """``request`` as a head of at most ``limit`` bytes (one sample at least) and the rest."""
    fits = [end for _, end in request.samples if end - request.start <= limit]
    cut = max(fits) if fits else request.samples[0][1]
    head = [sample for sample in request.samples if sample[1] <= cut]
    rest = [sample for sample in request.samples if sample[1] > cut]
    if not rest:
        return [request]
    first = Request(request.name, request.start, cut, request.first, head)
    other = Request(request.name, min(s for s, _ in rest), request.end, request.first, rest)
    return [first, other]


@dataclass(eq=False)
class _Chunk:
    """A request with its state: queued (no future), in flight or received."""

    request: Request
    wanted: int = 0  # reads of its samples still expected
    touched: int = 0  # the read tick of the last use
    future: Future[bytes] | None = None
    dropped: bool = False
    keys: set[SampleKey] = field(default_factory=set)


@dataclass(eq=False)
class _Slot:
    chunk: _Chunk
    count: int = 0  # reads of this sample still expected


class Prefetcher:
    """Fetches announced samples ahead in coalesced ranged reads, within a budget of bytes."""

    def __init__(
        self,
        store: Store,
        *,
        budget: int | None = None,
        threads: int | None = None,
        gap: int = REMOTE_GAP,
        cap: int = MAX_REQUEST,
    ) -> None:
        self.store = store
        self.budget = budget_from_env() if budget is None else budget
        self.threads = threads_from_env() if threads is None else max(1, threads)
        self.gap, self.cap = gap, cap
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._slots: dict[SampleKey, _Slot] = {}
        self._queue: deque[_Chunk] = deque()
        self._live: set[_Chunk] = set()
        self._by_name: dict[str, list[_Chunk]] = {}  # the chunks not dropped, by shard
        self._held = 0
        self._tick = 0
        self._last_scan = 0
        #: Requests submitted by this process (for tests and benchmarks).
        self.requests = 0

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("store", "budget", "threads", "gap", "cap")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    @property
    def held_bytes(self) -> int:
        """Bytes of requests in flight or received and not yet fully read."""
        return self._held

    def _own(self) -> None:
        if os.getpid() != self._pid:  # forked: the pool, lock and buffers are the parent's
            self._reset()

    def want(self, samples: Iterable[SampleKey]) -> None:
        """Announce that ``samples`` (shard, start, end) are read next, in this order."""
        if not self.enabled:
            return
        self._own()
        with self._lock:
            fresh: list[SampleKey] = []
            for key in samples:
                slot = self._slots.get(key)
                if slot is None:  # inside a range already coming (read to fill a gap)?
                    chunk = self._covering(key)
                    if chunk is not None:
                        slot = self._slots[key] = _Slot(chunk)
                        chunk.keys.add(key)
                if slot is not None:  # already coming: one more read of it
                    slot.count += 1
                    slot.chunk.wanted += 1
                else:
                    fresh.append(key)
            requests = plan_requests(fresh, gap=self.gap, cap=self.cap)
            if requests and not self._held and not self._queue:
                # Cold (nothing coming): the first request is small, so that the first samples
                # arrive sooner; the others are full size (each request costs CPU on both ends).
                requests[:1] = split_head(requests[0], FIRST_REQUEST)
            for request in requests:
                chunk = _Chunk(request, touched=self._tick)
                self._by_name.setdefault(request.name, []).append(chunk)
                for start, end in request.samples:
                    key = (request.name, start, end)
                    slot = self._slots.get(key)
                    if slot is None:
                        slot = self._slots[key] = _Slot(chunk)
                        chunk.keys.add(key)
                    slot.count += 1
                    slot.chunk.wanted += 1
                self._queue.append(chunk)
            self._pump()

    def take(self, name: str, start: int, end: int) -> bytes | None:
        """The bytes ``[start, end)`` of ``name`` if announced (waiting for them), else None.

        Raises:
            StorageError: the request that fetched them failed (as ``read_range`` raises).
        """
        if not self.enabled:
            return None
        self._own()
        key = (name, start, end)
        with self._lock:
            self._tick += 1
            slot = self._slots.get(key)
            if slot is None:
                return None
            chunk = slot.chunk
            slot.count -= 1
            if slot.count == 0:
                del self._slots[key]
                chunk.keys.discard(key)
            chunk.wanted -= 1
            chunk.touched = self._tick
            if chunk.future is None:  # needed now: fetch it even over the budget
                self._submit(chunk)
            future = chunk.future
            if chunk.wanted <= 0:
                self._drop(chunk)
                self._pump()
        assert future is not None
        data = future.result()
        offset = start - chunk.request.start
        return data[offset : offset + end - start]

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, run on the pool (the first error is raised)."""
        self._own()
        with self._lock:
            pool = self._ensure_pool()
        return list(pool.map(fn, items))

    def close(self) -> None:
        """Forget everything announced and shut the pool down (a later use starts a new one)."""
        if os.getpid() != self._pid:
            self._reset()
            return
        with self._lock:
            pool = self._pool
            for chunk in self._live:
                if chunk.future is not None:
                    chunk.future.cancel()
            self._reset()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # -- under the lock -----------------------------------------------------------------------
    def _ensure_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="stoker-prefetch")
        return self._pool

    def _submit(self, chunk: _Chunk) -> None:
        request = chunk.request
        chunk.future = self._ensure_pool().submit(
            self.store.read_range, request.name, request.start, request.size
        )
        chunk.touched = self._tick
        self._live.add(chunk)
        self._held += request.size
        self.requests += 1

    def _covering(self, key: SampleKey) -> _Chunk | None:
        name, start, end = key
        for chunk in self._by_name.get(name, ()):
            if chunk.request.start <= start and end <= chunk.request.end:
                return chunk
        return None

    def _drop(self, chunk: _Chunk) -> None:
        chunk.dropped = True
        chunks = self._by_name.get(chunk.request.name)
        if chunks is not None:
            chunks.remove(chunk)
            if not chunks:
                del self._by_name[chunk.request.name]
        for key in chunk.keys:
            self._slots.pop(key, None)
        chunk.keys.clear()
        if chunk in self._live:
            self._live.discard(chunk)
            self._held -= chunk.request.size

    def _pump(self) -> None:
        """Submit queued requests in order while the budget allows (at least one in flight)."""
        while self._queue:
            chunk = self._queue[0]
            if chunk.future is not None or chunk.dropped:
                self._queue.popleft()
                continue
            if self._held and self._held + chunk.request.size > self.budget:
                if not self._evict_stale():
                    return
                continue
            self._queue.popleft()
            self._submit(chunk)

    def _evict_stale(self) -> bool:
        """Drop received requests nobody read for long (their readers went away)."""
        limit = max(_STALE_READS, 4 * len(self._slots))
        if self._tick - self._last_scan < 64:
            return False
        self._last_scan = self._tick
        stale = [
            c
            for c in self._live
            if c.future is not None and c.future.done() and self._tick - c.touched > limit
        ]
        for chunk in stale:
            self._drop(chunk)
        return bool(stale)
