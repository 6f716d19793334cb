"""Batch slots shared by all the workers of a loader (see :mod:`stoker.pipeline.transport`).

Per-worker slots need ``prefetch_factor`` batches of shared memory per worker, although, when
the workers are the slower side, each of them builds one batch while the training loop holds
another: ``num_workers + 1`` batches. A :class:`SlotPool` is that many slots, made by the main
process before the workers fork (so every process maps them already, nothing is sent) and
claimed by whichever worker builds a batch next:

* a slot is an anonymous shared mapping of :data:`SLOT_BYTES` (``mmap``: inherited by forked
  processes, made in microseconds): only the pages a batch writes take memory (the largest
  batch's), and the lowest free slot is claimed first, so a slot the workers never need at once
  with the others is never touched; a batch larger than a slot takes per-worker slots (sized
  as without a pool);
* a table in shared memory says which slots are claimed; a semaphore counts the free ones, so a
  worker waits for one without polling (:meth:`SlotPool.claim`, with a timeout: a training loop
  that keeps batches never deadlocks its workers, they take fresh segments instead);
* no worker holds more than ``slots - (owners - 1)`` slots (a semaphore per worker): the main
  process hands batches out in worker order, so a worker that ran ahead and took every slot
  would leave the worker whose batch is due none (it waited in vain, then took a fresh
  segment: memory and page faults);
* the main process frees a slot once every tensor of the batch in it is freed (or, for float
  batches sent as uint8, scaled): :meth:`SlotPool.free`.

A slot a worker claimed but did not send (its batch failed, say) is not freed: user code may
still hold a tensor in it. A worker killed while holding the table's lock leaves the others
waiting at most :data:`LOCK_SECONDS` per claim, then they take fresh segments.

Example:
    >>> import multiprocessing
    >>> pool = SlotPool(multiprocessing.get_context("fork"), slots=3, owners=2, slot_bytes=1 << 20)
    >>> number = pool.claim(0.0, owner=1)
    >>> pool.array(number)[:4].tolist()  # a fresh slot is zero-filled
    [0, 0, 0, 0]
    >>> pool.claim(0.0, owner=1), pool.claim(0.0, owner=1)  # the last one is left to owner 0
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
#: Slots beyond one per worker (the batch the training loop holds).
EXTRA_SLOTS = 1
#: How long a claim waits for the table's lock.
LOCK_SECONDS = 1.0
#: Tensors in a slot start at multiples of this (cache lines, SIMD loads).
ALIGN = 64


class SlotPool:
    """``slots`` shared-memory slots of ``slot_bytes`` (see module)."""

    def __init__(
        self, context: Any, slots: int, *, owners: int = 1, slot_bytes: int = SLOT_BYTES
    ) -> None:
        self.slot_bytes = slot_bytes
        self._maps = [mmap.mmap(-1, slot_bytes) for _ in range(slots)]  # MAP_SHARED, zero
        self._arrays = [np.frombuffer(m, dtype=np.uint8) for m in self._maps]
        self.storages = [torch.from_numpy(a).untyped_storage() for a in self._arrays]
        #: 0: free; else the claiming worker + 1 (until the main process frees its batch)
        self.claimed = context.RawArray("b", slots)
        self.written = context.RawArray("q", slots)  # the most bytes a batch used of each
        self.frees = context.RawValue("q", 0)  # slots given back so far (progress)
        self.lock = context.Lock()
        self.free_slots = context.Semaphore(slots)
        most = max(1, slots - owners + 1)
        self.own = [context.Semaphore(most) for _ in range(owners)]  # slots each may claim
        self._by_pointer = {s.data_ptr(): n for n, s in enumerate(self.storages)}

    def __len__(self) -> int:
        return len(self.storages)

    def number(self, storage: torch.UntypedStorage) -> int | None:
        """The number of the slot ``storage`` is, or None."""
        return self._by_pointer.get(storage.data_ptr())

    def claim(self, wait: float, owner: int = 0) -> int | None:
        """A free slot's number, now claimed by worker ``owner``, waiting up to ``wait`` s for
        one; None if none (or ``owner`` holds its most already)."""
        deadline = time.monotonic() + wait
        if not _acquire(self.own[owner], wait):
            return None
        if not _acquire(self.free_slots, max(0.0, deadline - time.monotonic()) if wait else 0.0):
            self.own[owner].release()
            return None
        if not self.lock.acquire(timeout=LOCK_SECONDS):  # its holder died: leave the pool be
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
        self.frees.value += 1
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


def _acquire(semaphore: Any, wait: float) -> bool:
    """Take ``semaphore``, waiting up to ``wait`` s (0: not at all)."""
    return bool(semaphore.acquire(timeout=wait) if wait else semaphore.acquire(False))


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to :data:`ALIGN`."""
    return -(-nbytes // ALIGN) * ALIGN


__all__ = ["EXTRA_SLOTS", "SLOT_BYTES", "SlotPool", "aligned"]
