"""Batch slots shared by all the workers of a loader (see :mod:`stoker.pipeline.transport`).

A :class:`SlotPool` is made by the main process before the workers fork (so every process maps
its slots already, nothing is sent); whichever worker builds a batch next claims a free slot.
It has :func:`pool_slots` slots: one per batch torch may keep in flight (``prefetch_factor``
per worker, the one being built included), one per batch the training loop may keep while it
asks for the next (``prefetch_factor x num_workers +``
:data:`HELD_BEYOND_IN_FLIGHT`: a plain loop keeps one, a loop that keeps the previous
batch two, gradient accumulation its micro-batches, Lightning the batch it trains on and the
one it fetched ahead) and one spare:

* a slot is an anonymous shared mapping of :data:`SLOT_BYTES` (``mmap``: inherited by forked
  processes, made in microseconds): only the pages a batch writes take memory (the largest
  batch's), and the lowest free slot is claimed first, so a slot the loop and the workers never
  need at once with the others is never touched: the memory is that of the most batches alive
  at once, at most ``pool_slots(...)`` batches, reported by :meth:`SlotPool.touched` (the
  loader's ``stats().shm_bytes``); a batch larger than a slot takes per-worker slots (sized as
  without a pool);
* a worker never waits for a slot (:meth:`SlotPool.claim` answers at once): where every slot is
  held (a loop keeping more than that), it builds the batch in fresh shared
  memory, as torch does, and the loader's ``stats()`` counts it (``slot_fallbacks``). A worker
  that waited for slots stalled the loop whenever the loop kept batches: the slot it waited for
  was one the loop would let go of only after the batch the worker was to build;
* a table in shared memory says which slots are claimed, a semaphore counts the free ones;
* no worker holds more than ``slots - (owners - 1)`` slots (a semaphore per worker): the main
  process hands batches out in worker order, so a worker that ran ahead and took every slot
  would leave the worker whose batch is due none;
* the main process frees a slot once every tensor of the batch in it is freed (or, for float
  batches sent as uint8, scaled): :meth:`SlotPool.free`.

A slot a worker claimed but did not send (its batch failed, say) is not freed: user code may
still hold a tensor in it. A worker killed while holding the table's lock leaves the others
waiting at most :data:`LOCK_SECONDS` per claim, then they take fresh segments.

Example:
    >>> import multiprocessing
    >>> pool = SlotPool(multiprocessing.get_context("fork"), slots=3, owners=2, slot_bytes=1 << 20)
    >>> number = pool.claim(owner=1)
    >>> pool.array(number)[:4].tolist()  # a fresh slot is zero-filled
    [0, 0, 0, 0]
    >>> pool.claim(owner=1), pool.claim(owner=1)  # the last one is left to owner 0
    (1, None)
    >>> pool.free(number)
"""

from __future__ import annotations

import mmap
import time
from typing import Any

import numpy as np
import torch

#: Address space of one pool slot; only the pages written take memory. Not more: tools that
#: read a process's memory map (``/proc/PID/smaps``, as ``psutil.memory_full_info`` does) walk
#: the pages never written too (~2 ms a GB, holding the process's memory map lock).
SLOT_BYTES = 128 << 20
#: The training loop may keep as many batches as torch keeps in flight (``prefetch_factor x
#: num_workers``) plus this many while it asks for the next, without a worker leaving the slots
#: (see :func:`pool_slots`).
HELD_BEYOND_IN_FLIGHT = 2
#: How long a claim waits for the table's lock.
LOCK_SECONDS = 1.0
#: Tensors in a slot start at multiples of this (cache lines, SIMD loads).
ALIGN = 64


class SlotPool:
    """``slots`` shared-memory slots of ``slot_bytes``, at most ``most`` (None: all but one per
    other owner) claimed by each of ``owners`` workers at once (see module)."""

    @classmethod
    def for_loader(cls, context: Any, workers: int, prefetch_factor: int) -> SlotPool:
        """The pool of a loader with ``workers`` forked workers (see :func:`pool_slots`)."""
        slots, most = pool_slots(workers, prefetch_factor)
        return cls(context, slots, owners=workers, most=most)

    def __init__(
        self,
        context: Any,
        slots: int,
        *,
        owners: int = 1,
        slot_bytes: int = SLOT_BYTES,
        most: int | None = None,
    ) -> None:
        self.slot_bytes = slot_bytes
        self._maps = [mmap.mmap(-1, slot_bytes) for _ in range(slots)]  # MAP_SHARED, zero
        self._arrays = [np.frombuffer(m, dtype=np.uint8) for m in self._maps]
        self.storages = [torch.from_numpy(a).untyped_storage() for a in self._arrays]
        #: 0: free; else the claiming worker + 1 (until the main process frees its batch)
        self.claimed = context.RawArray("b", slots)
        self.written = context.RawArray("q", slots)  # the most bytes a batch used of each
        self.lock = context.Lock()
        self.free_slots = context.Semaphore(slots)
        most = max(1, slots - owners + 1) if most is None else min(most, slots)
        self.own = [context.Semaphore(most) for _ in range(owners)]  # slots each may claim
        self._by_pointer = {s.data_ptr(): n for n, s in enumerate(self.storages)}
        #: Seconds the last :meth:`claim` waited for the table's lock (another process was
        #: claiming or freeing a slot); never for a slot.
        self.waited = 0.0

    def __len__(self) -> int:
        return len(self.storages)

    def number(self, storage: torch.UntypedStorage) -> int | None:
        """The number of the slot ``storage`` is, or None."""
        return self._by_pointer.get(storage.data_ptr())

    def claim(self, owner: int = 0) -> int | None:
        """A free slot's number, now claimed by worker ``owner``; None at once if none is free
        (or ``owner`` holds its most already): the caller builds its batch elsewhere."""
        self.waited = 0.0
        if not self.own[owner].acquire(False):
            return None
        if not self.free_slots.acquire(False):
            self.own[owner].release()
            return None
        if not self.lock.acquire(False):
            started = time.perf_counter()
            locked = self.lock.acquire(timeout=LOCK_SECONDS)
            self.waited = time.perf_counter() - started
            if not locked:  # its holder died: leave the pool be
                self.free_slots.release()
                self.own[owner].release()
                return None
        try:
            for number in range(len(self.storages)):
                if not self.claimed[number]:
                    self.claimed[number] = owner + 1
                    return number
        finally:
            self.lock.release()
        self.free_slots.release()  # not reached: the semaphore counts free slots
        self.own[owner].release()
        return None

    def free(self, number: int) -> None:
        """Give slot ``number`` back (its batch is freed everywhere)."""
        owner = self.claimed[number] - 1
        self.claimed[number] = 0
        self.free_slots.release()
        if owner >= 0:
            self.own[owner].release()

    def used(self, number: int, nbytes: int) -> None:
        """Note that a batch in slot ``number`` uses its first ``nbytes``."""
        self.written[number] = max(self.written[number], nbytes)

    def touched(self) -> tuple[int, int]:
        """The slots batches have used so far, and their bytes (the memory they take)."""
        written = [n for n in self.written if n]
        return len(written), sum(written)

    def array(self, number: int) -> np.ndarray[Any, Any]:
        """Slot ``number``'s bytes as a numpy array (one per slot, kept)."""
        return self._arrays[number]


def pool_slots(workers: int, prefetch_factor: int) -> tuple[int, int]:
    """The slots of a loader's pool, and the most one worker may hold at once.

    The pool holds the batches torch keeps in flight, those the training loop may keep meanwhile
    (as many plus :data:`HELD_BEYOND_IN_FLIGHT`) and a spare. A worker holds its batches in
    flight, its share of those the loop keeps and a spare: one that runs ahead (while the loop
    waits for another worker's batch, the main process takes its batches and torch asks it for
    more) then builds in fresh memory rather than take every slot. Only the slots batches use
    at once take memory (see the module).

    Example:
        >>> pool_slots(2, 2)  # 4 in flight, up to 6 kept by the loop (4 + 2), a spare
        (11, 6)
    """
    in_flight = workers * prefetch_factor
    held = in_flight + HELD_BEYOND_IN_FLIGHT
    share = -(-held // workers)
    return in_flight + held + 1, prefetch_factor + share + 1


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to :data:`ALIGN`."""
    return -(-nbytes // ALIGN) * ALIGN


__all__ = ["HELD_BEYOND_IN_FLIGHT", "SLOT_BYTES", "SlotPool", "aligned", "pool_slots"]
