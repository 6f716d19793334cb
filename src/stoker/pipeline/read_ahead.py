"""The read-ahead of one process: one byte budget and one thread pool for all its readers.

Every reader of remote shards in a process (one per data source of a dataloader worker, plus
joined and auxiliary stores) announces the samples it reads next to the process's
:class:`ReadAhead` (:func:`read_ahead`), sized by ``LoaderOptions.prefetch_bytes`` and
``prefetch_threads``. Each reader's requests are fetched in its own order; the readers take turns,
so a blend of many sources reads ahead in all of them while the bytes held by the process (in
flight or received, not yet read) stay within the one budget. A 50-source blend at 8 workers thus
holds at most 8 budgets of read-ahead and runs at most 8 pools of threads per rank, not 400.

A sample needed before its request's turn is fetched at once, over the budget: a reader never
waits for room. Merged requests are at most a quarter of the budget per reader (and at most
:data:`~stoker.pipeline.prefetch_plan.MAX_REQUEST`), so what the readers are in the middle of
adds at most a quarter of the budget: the bytes held stay under 1.25 budgets (plus samples larger
than a request, one per reader).

Within the budget, a process fetches only as far ahead as keeps its readers from waiting: the
requests no read took from yet add up to at most its *lead*, which starts at
:data:`FIRST_LEAD` bytes and doubles whenever a read has to wait for a request that was
submitted many reads before, or that the lead had held back. Fetching all that the budget
allows at once would make the first samples wait for (and share the CPU with) the transfer of
all the others; on a fast store the lead stays small.

The pool and the buffers belong to one process: a forked child starts afresh.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from stoker.pipeline.prefetch_plan import (
    FIRST_REQUEST,
    MAX_REQUEST,
    REMOTE_GAP,
    SampleKey,
    ShardSamples,
    by_shard,
    plan_shards,
    split_head,
)
from stoker.pipeline.read_ahead_chunk import Chunk, covering, not_covered
from stoker.storage import Store
from stoker.storage.options import current

#: A received request untouched for this many reads (at least) may be dropped to make room.
_STALE_READS = 1024
#: The bytes a process reads ahead at first (requests in flight or received that no read took
#: from yet); doubled each time a read has to wait for a request submitted long before, up to
#: the budget.
FIRST_LEAD = 8 << 20
#: Reads between a request's submission (or a cold start) and a wait for it after which the wait
#: means the lead is too short (sooner, nothing could have been there yet).
_HEAD_START = 64

T = TypeVar("T")
R = TypeVar("R")


class ReadAhead:
    """Fetches announced samples of many readers ahead, within one budget and one pool."""

    def __init__(
        self, budget: int, threads: int, *, gap: int = REMOTE_GAP, cap: int = MAX_REQUEST
    ) -> None:
        self.budget, self.threads = budget, max(1, threads)
        self.gap, self.cap = gap, cap
        self._tokens = itertools.count()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._stores: dict[int, Store] = {}
        self._queues: dict[int, deque[Chunk]] = {}  # per reader, in its order
        self._turns: deque[int] = deque()  # readers with queued requests, whose turn is next
        self._live: set[Chunk] = set()
        self._by_name: dict[tuple[int, str], list[Chunk]] = {}  # chunks not dropped
        self._held = 0
        #: How far ahead the readers fetch: what keeps them from waiting, within the budget.
        self.lead = min(self.budget, FIRST_LEAD)
        self._ahead = 0  # bytes of submitted requests no read took from yet
        self._tick = 0
        self._cold = 0  # the tick of the last cold start
        self._last_scan = 0
        #: Requests submitted, and the most bytes held at once (for tests and benchmarks).
        self.requests = 0
        self.peak_bytes = 0

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    @property
    def held_bytes(self) -> int:
        """Bytes of requests in flight or received and not yet fully read."""
        return self._held

    @property
    def readers(self) -> int:
        """Readers registered (each reader of remote shards of a data source)."""
        return len(self._stores)

    @property
    def request_cap(self) -> int:
        """The largest merged request: a quarter of the budget per reader, so that the requests
        the readers are in the middle of hold at most a quarter of the budget (a sample larger
        than this is one request of its own)."""
        return min(self.cap, max(1, self.budget // (4 * max(1, len(self._stores)))))

    def _own(self) -> None:
        if os.getpid() != self._pid:  # forked: the pool, lock and buffers are the parent's
            self._reset()

    def register(self, store: Store) -> int:
        """A new reader of ``store``: the token it announces and takes with."""
        self._own()
        with self._lock:
            token = next(self._tokens)
            self._stores[token] = store
            return token

    def want(self, reader: int, samples: Iterable[SampleKey]) -> None:
        """Announce that ``samples`` (shard, start, end) are read next by ``reader``, in order."""
        if self.enabled:
            self.want_shards(reader, by_shard(samples))

    def want_shards(self, reader: int, shards: Sequence[ShardSamples]) -> None:
        """:meth:`want` of samples given by shard as arrays (their places: the read order)."""
        if not self.enabled:
            return
        self._own()
        with self._lock:
            if reader not in self._stores:
                return  # forgotten, or announced in another process
            fresh: list[ShardSamples] = []
            for shard in shards:
                chunks = self._by_name.get((reader, shard.name))
                if chunks:  # inside a range already coming (read to fill a gap)?
                    shard = not_covered(shard, chunks)
                if len(shard.places):
                    fresh.append(shard)
            self._queue(reader, fresh)
            self._pump()

    def _queue(self, reader: int, fresh: list[ShardSamples]) -> None:
        cap = min(self.cap, self.request_cap)
        requests = plan_shards(fresh, gap=self.gap, cap=cap)
        queue = self._queues.setdefault(reader, deque())
        cold = bool(requests) and not queue and not any(c.reader == reader for c in self._live)
        if cold:
            # Nothing coming: the first request is small, so that the first samples arrive
            # sooner; the others are full size (each request costs CPU on both ends).
            requests[:1] = split_head(requests[0], FIRST_REQUEST)
            if not self._live:  # the process's first reads: waits are no sign of a short lead
                self._cold = self._tick
        for request in requests:
            chunk = Chunk(reader, request, wanted=len(request.samples), touched=self._tick)
            # What the first reads need is fetched at once, in parallel, whatever the lead.
            chunk.urgent = cold and request.first < _HEAD_START
            self._by_name.setdefault((reader, request.name), []).append(chunk)
            queue.append(chunk)
        if requests and reader not in self._turns:
            self._turns.appendleft(reader)  # not served lately: its turn comes first

    def take(self, reader: int, name: str, start: int, end: int) -> bytes | None:
        """The bytes ``[start, end)`` of ``name`` if ``reader`` announced a request that holds
        them (waiting for it), else None: the caller reads them directly.

        A request is let go when as many reads as it was announced for took from it (a read
        of bytes that lie in it counts, announced or not).

        Raises:
            StorageError: the request that fetched them failed (as ``read_range`` raises).
        """
        if not self.enabled:
            return None
        if os.getpid() != self._pid:
            self._reset()
        with self._lock:
            self._tick += 1
            chunks = self._by_name.get((reader, name))
            chunk = covering(chunks, start, end) if chunks else None
            if chunk is None:
                TAKEN["misses"] += 1
                return None
            TAKEN["hits"] += 1
            # Needed before it was fetched, or submitted reads ago (not just now, as at a cold
            # start) and still not here: the lead is too short for this store and this
            # reading order, so fetch further from now on.
            short = self._tick - self._cold >= _HEAD_START and (
                chunk.future is None
                or (not chunk.future.done() and self._tick - chunk.submitted >= _HEAD_START)
            )
            if chunk.future is None:  # needed now: fetch it even over the budget
                chunk.used = True
                self._submit(chunk)
            future = chunk.future
            pump = self._read_from(chunk)
            if short and self.lead < self.budget:
                self.lead = min(self.budget, 2 * self.lead)
                pump = True
            if pump:
                self._pump()
        assert future is not None
        data = future.result()
        offset = start - chunk.request.start
        return data[offset : offset + end - start]

    def take_held(self, reader: int, samples: Sequence[SampleKey]) -> list[bytes]:
        """The bytes of the first of ``samples`` (shard, start, end), as :meth:`take` gives
        them, as long as each lies in a request of ``reader`` that was received whole: it never
        waits, and it stops at the first sample that is not (not announced, still coming, or
        whose request failed), which the caller then reads with :meth:`take` (that waits,
        raises, or says to read directly, as for any read). Each sample given counts as one
        read of it, as with :meth:`take`; the lock is taken once for all.
        """
        out: list[bytes] = []
        if not self.enabled or os.getpid() != self._pid:
            return out
        append = out.append
        with self._lock:
            by_name = self._by_name
            pump = False
            for name, start, end in samples:
                chunks = by_name.get((reader, name))
                chunk = covering(chunks, start, end) if chunks else None
                if chunk is None:
                    break
                data = chunk.data
                if data is None:
                    future = chunk.future
                    if future is None or not future.done() or future.cancelled():
                        break
                    if future.exception() is not None:
                        break
                    data = chunk.data = future.result()
                self._tick += 1
                pump = self._read_from(chunk) or pump
                offset = start - chunk.request.start
                append(data[offset : offset + end - start])
            TAKEN["hits"] += len(out)
            if pump:
                self._pump()
        return out

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, run on the pool (the first error is raised)."""
        self._own()
        with self._lock:
            pool = self._ensure_pool()
        return list(pool.map(fn, items))

    def forget(self, reader: int) -> None:
        """Drop what ``reader`` announced; the last reader gone shuts the pool down (a later
        use starts a new one)."""
        self._own()
        with self._lock:
            self._stores.pop(reader, None)
            for chunk in [c for chunks in self._by_name.values() for c in chunks]:
                if chunk.reader == reader:
                    if chunk.future is not None:
                        chunk.future.cancel()
                    self._drop(chunk)
            self._queues.pop(reader, None)
            pool = None
            if not self._stores:
                pool, self._pool = self._pool, None
            self._pump()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # -- under the lock -----------------------------------------------------------------------
    def _ensure_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="stoker-prefetch")
        return self._pool

    def _submit(self, chunk: Chunk) -> None:
        request, store = chunk.request, self._stores[chunk.reader]
        chunk.future = self._ensure_pool().submit(
            store.read_range, request.name, request.start, request.size
        )
        chunk.touched = self._tick
        chunk.submitted = self._tick
        if not chunk.used:
            self._ahead += request.size
        self._live.add(chunk)
        self._held += request.size
        self.peak_bytes = max(self.peak_bytes, self._held)
        self.requests += 1

    def _read_from(self, chunk: Chunk) -> bool:
        """Count a read that took from ``chunk`` (let go once its last expected read came);
        whether that made room to fetch more."""
        chunk.wanted -= 1
        chunk.touched = self._tick
        room = False
        if not chunk.used:  # no longer ahead of the readers: room to fetch the next
            chunk.used = room = True
            self._ahead -= chunk.request.size
        if chunk.wanted <= 0:
            self._drop(chunk)
            room = True
        return room

    def _drop(self, chunk: Chunk) -> None:
        chunk.dropped = True
        chunks = self._by_name.get((chunk.reader, chunk.request.name))
        if chunks is not None and chunk in chunks:
            chunks.remove(chunk)
            if not chunks:
                del self._by_name[(chunk.reader, chunk.request.name)]
        if chunk in self._live:
            self._live.discard(chunk)
            self._held -= chunk.request.size
            if not chunk.used:
                self._ahead -= chunk.request.size

    def _next_queued(self) -> Chunk | None:
        """The next request to fetch: the head of the queue of the reader whose turn it is."""
        while self._turns:
            queue = self._queues.get(self._turns[0])
            while queue and (queue[0].future is not None or queue[0].dropped):
                queue.popleft()
            if queue:
                return queue[0]
            self._turns.popleft()
        return None

    def _pump(self) -> None:
        """Submit queued requests, the readers taking turns, while the lead and the budget
        allow (at least one in flight)."""
        while (chunk := self._next_queued()) is not None:
            if self._held and self._held + chunk.request.size > self.budget:
                if not self._evict_stale():
                    return
                continue
            if self._ahead and self._ahead + chunk.request.size > self.lead and not chunk.urgent:
                return  # far enough ahead: more is fetched as the readers go on
            self._queues[chunk.reader].popleft()
            self._submit(chunk)
            self._turns.rotate(-1)

    def _evict_stale(self) -> bool:
        """Drop received requests nobody read for long (their readers went away)."""
        limit = max(_STALE_READS, 4 * sum(c.wanted for c in self._live))
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


_PROCESS: list[ReadAhead] = []
#: Reads served from the read-ahead (hits) or not announced to it (misses), in this process.
TAKEN = {"hits": 0, "misses": 0}


def read_ahead() -> ReadAhead:
    """This process's read-ahead, made on first use from its ``LoaderOptions``
    (:func:`stoker.storage.options.current`); other options make a new one for new readers."""
    options = current()
    service = _PROCESS[0] if _PROCESS else None
    if (
        service is None
        or service._pid != os.getpid()
        or (service.budget, service.threads) != (options.prefetch_bytes, options.prefetch_threads)
    ):
        service = ReadAhead(options.prefetch_bytes, options.prefetch_threads)
        _PROCESS[:] = [service]
    return service
