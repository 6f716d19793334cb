"""Read-ahead for remote stores: the samples the plan says come next, fetched in coalesced ranges.

A :class:`Prefetcher` is one reader's view of its process's read-ahead
(:mod:`stoker.pipeline.read_ahead`). It is told which samples (shard, byte range) are read next,
in the order they will be read; ranges of a shard closer than ``gap`` bytes are merged into
requests of at most ``cap`` bytes (:mod:`stoker.pipeline.prefetch_plan`), fetched with
``store.read_range`` on the process's thread pool, in the order they are first needed, while the
bytes held by all readers of the process stay within ``LoaderOptions.prefetch_bytes`` (256 MiB by
default; 0 turns read-ahead off). :meth:`Prefetcher.take` hands out a sample's bytes (waiting for
its request if it is in flight). A sample it does not know is the caller's to read directly, so a
skipped or unplanned read is never wrong, only slower.

A forked child starts afresh (a pool made in another process is never used), and
:meth:`Prefetcher.close` forgets what this reader announced.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from stoker.pipeline.prefetch_plan import (
    FIRST_REQUEST,
    MAX_REQUEST,
    REMOTE_GAP,
    Request,
    SampleKey,
    ShardSamples,
    plan_requests,
    split_head,
)
from stoker.pipeline.read_ahead import ReadAhead, read_ahead
from stoker.storage import Store
from stoker.storage.options import current

__all__ = [
    "FIRST_REQUEST",
    "MAX_REQUEST",
    "REMOTE_GAP",
    "Prefetcher",
    "Request",
    "SampleKey",
    "ShardSamples",
    "plan_requests",
    "split_head",
]

T = TypeVar("T")
R = TypeVar("R")


class Prefetcher:
    """One reader's read-ahead of ``store``.

    Without ``budget`` and ``threads`` it shares the process's :class:`ReadAhead` with every
    other reader; with either, it has a private one of its own (for tests and tools).
    """

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
        self._private = (budget, threads, gap, cap) if budget is not None or threads else None
        self._attach()

    def _attach(self) -> None:
        self._pid = os.getpid()
        self._token: int | None = None  # registered with the service on first announcement
        self._service: ReadAhead | None = None  # found on first use (in the process using it)

    def __getstate__(self) -> dict[str, Any]:
        return {"store": self.store, "_private": self._private}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._attach()

    @property
    def service(self) -> ReadAhead:
        """The read-ahead this reader uses: its process's (or its private one)."""
        if os.getpid() != self._pid:  # forked: the parent's read-ahead is not ours
            self._attach()
        if self._service is None:
            if self._private is None:
                self._service = read_ahead()
            else:
                budget, threads, gap, cap = self._private
                options = current()  # the process's sizes fill in what was not given
                self._service = ReadAhead(
                    options.prefetch_bytes if budget is None else budget,
                    options.prefetch_threads if threads is None else threads,
                    gap=gap,
                    cap=cap,
                )
        return self._service

    def _registered(self) -> int:
        service = self.service
        if self._token is None:
            self._token = service.register(self.store)
        return self._token

    @property
    def budget(self) -> int:
        return self.service.budget

    @property
    def threads(self) -> int:
        return self.service.threads

    @property
    def enabled(self) -> bool:
        return self.service.enabled

    @property
    def held_bytes(self) -> int:
        """Bytes held by the read-ahead this reader shares (in flight or not yet read)."""
        return self.service.held_bytes

    @property
    def requests(self) -> int:
        """Requests the read-ahead this reader shares has submitted."""
        return self.service.requests

    def want(self, samples: Iterable[SampleKey]) -> None:
        """Announce that ``samples`` (shard, start, end) are read next, in this order."""
        token = self._registered()
        self.service.want(token, samples)

    def want_shards(self, shards: Sequence[ShardSamples]) -> None:
        """:meth:`want` of samples given by shard as arrays (their places: the read order)."""
        token = self._registered()
        self.service.want_shards(token, shards)

    def take(self, name: str, start: int, end: int) -> bytes | None:
        """The bytes ``[start, end)`` of ``name`` if announced (waiting for them), else None.

        Raises:
            StorageError: the request that fetched them failed (as ``read_range`` raises).
        """
        service = self.service  # (after a fork: a new one, and no token)
        if self._token is None:
            return None
        return service.take(self._token, name, start, end)

    def take_held(self, samples: Sequence[SampleKey]) -> list[bytes]:
        """The bytes of the first of ``samples`` (shard, start, end) that were announced and
        are received already, up to the first that is not (:meth:`ReadAhead.take_held`): never
        waits, never raises for a failed request (:meth:`take` reads and reports those)."""
        service = self.service
        if self._token is None:
            return []
        return service.take_held(self._token, samples)

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]``, run on the shared pool (the first error raised)."""
        self._registered()  # the pool lives while a reader is registered
        return self.service.map(fn, items)

    def close(self) -> None:
        """Forget what this reader announced (the last reader of a process to close shuts the
        pool down); announcing again registers it anew."""
        service = self.service
        if self._token is not None:
            service.forget(self._token)
            self._token = None
