"""A worker's side of the batch transport: the slots it builds batches in, and their pickling.

A worker keeps a few shared-memory *slots* of its own, sized from its largest batch
(:func:`slot_budget`), or takes the batch's tensors from a slot of its loader's shared pool
(:mod:`stoker.pipeline.pool_claim`); :meth:`WorkerTransport.export` pickles a batch with its slot
tensors by reference (:mod:`stoker.pipeline.exported`), and :meth:`WorkerTransport.buffer` takes
a slot again once the main process has sent its number back. See
:mod:`stoker.pipeline.transport` for the whole exchange.
"""

from __future__ import annotations

import io
import math
import queue
from dataclasses import dataclass
from typing import Any

import torch

from stoker.pipeline.batch_pickler import BatchPickler
from stoker.pipeline.exported import Exported, in_ring
from stoker.pipeline.payload_ring import PayloadRing
from stoker.pipeline.pool_claim import PoolClaim
from stoker.pipeline.shared_tensors import new_shared, tensor_on
from stoker.pipeline.slot_pool import SlotPool
from stoker.storage.options import BATCH_SLOTS_MB

#: Tensors smaller than this take torch's own path (a slot per tiny tensor is not worth it).
MIN_SLOT_BYTES = 1 << 20
#: Shared memory (MB) a worker may keep in slots; None: sized from the batches (see
#: :func:`slot_budget`). ``LoaderOptions.batch_slots_mb`` overrides it (0 turns reuse off).
SLOTS_MB = BATCH_SLOTS_MB
#: Slots for batches besides the ``prefetch_factor`` ones a worker may have in flight: none (a
#: worker whose slots are all held takes a fresh segment; the pool, where there is one, holds
#: the batches the training loop keeps).
EXTRA_BATCHES = 0
#: What :attr:`WorkerTransport.counters` counts (summed over the workers by ``stats()``, but
#: ``slot_wait_max_s``, the longest).
SLOT_COUNTERS = ("slot_fallbacks", "slot_waits", "slot_wait_s", "slot_wait_max_s")


def slot_budget(batch_bytes: int, prefetch_factor: int) -> int:
    """Bytes of slots a worker keeps: one per batch in flight, ``prefetch_factor`` plus
    :data:`EXTRA_BATCHES`, each ``batch_bytes`` (the largest batch so far) and a sixteenth of
    room for slightly larger batches. A batch beyond it takes a fresh segment.

    Example:
        >>> slot_budget(26 << 20, 2) >> 20  # uint8 images of up to 512 x 512, batch 32
        55
    """
    return (prefetch_factor + EXTRA_BATCHES) * batch_bytes * 17 // 16


@dataclass
class _Slot:
    number: int
    storage: torch.UntypedStorage
    sent: bool = False  # the main process has the storage
    exports: int = 0  # batches referring to the slot that the main process has not released
    allocated: bool = False  # handed out for the batch being built
    scaled: bool = False  # uint8 pixels of a float batch: the main process scales them


class WorkerTransport:
    """A worker's slots; :func:`~stoker.pipeline.transport.batch_buffer` allocates from
    the active one."""

    def __init__(
        self,
        releases: Any,
        budget_mb: float | None = SLOTS_MB,
        prefetch_factor: int = 2,
        *,
        floats_as_uint8: bool = False,
        pool: SlotPool | None = None,
    ) -> None:
        self.releases = releases
        self.pool = pool
        #: This worker's stats count the pool's slots (one worker of a loader does).
        self.reports_pool = False
        self.worker = 0  # this worker's number (it claims pool slots as)
        #: The batch's slot of the shared pool, where there is one.
        self._claim = None if pool is None else PoolClaim(pool, self._waited)
        #: No user code sees a batch between batching and export: float image batches may be
        #: built as uint8 and scaled by the main process
        #: (:func:`~stoker.pipeline.transport.image_buffer`).
        self.floats_as_uint8 = floats_as_uint8
        #: A fixed budget in bytes, or None: :func:`slot_budget` of the largest batch so far.
        self.budget = None if budget_mb is None else int(budget_mb * 2**20)
        self.prefetch_factor = prefetch_factor
        self._batch_bytes = 0  # the most slot bytes one batch has asked for
        self._asked = 0  # slot bytes the batch being built has asked for
        self.slots: dict[int, _Slot] = {}  # by storage data pointer
        self._numbers = 0
        self._dropped: list[int] = []
        self._in_batch: set[int] = set()  # slots the batch being pickled refers to
        #: Slot storages the batch being pickled sends for the first time (see Exported.storages).
        self._new_storages: list[torch.UntypedStorage] = []
        #: Tensors outside slots of the batch being pickled (see Exported.side).
        self._side: list[torch.Tensor] = []
        #: Since the worker started: ``slot_fallbacks`` (batch tensors built in a fresh segment
        #: because every slot was held), ``slot_waits`` / ``slot_wait_s`` / ``slot_wait_max_s``
        #: (claims of a pool slot that waited for the pool's table lock, never for a slot).
        self.counters: dict[str, float] = dict.fromkeys(SLOT_COUNTERS, 0)
        #: Where pickles of plain data go (see :mod:`stoker.pipeline.payload_ring`).
        self.ring = PayloadRing()

    def buffer(
        self, shape: tuple[int, ...], dtype: torch.dtype, scaled: bool = False
    ) -> torch.Tensor | None:
        """An uninitialised tensor in a free slot, or None (then use a fresh segment).
        ``scaled``: uint8 pixels the main process makes float32 (see
        :func:`~stoker.pipeline.transport.image_buffer`)."""
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_SLOT_BYTES:
            return None
        self._asked += nbytes
        claim = self._claim
        if claim is not None:
            pooled = claim.buffer(self.worker, nbytes, shape, dtype, scaled)
            if pooled is not None:
                return pooled
        self._drain()
        slot = self._free_slot(nbytes)
        # (no budget and no pool tried: the user turned reuse off)
        reuses = self._budget() > 0 or (claim is not None and claim.tried)
        if slot is None and reuses:  # every slot is held: fresh memory
            self.counters["slot_fallbacks"] += 1
            if scaled:  # a slot beyond the budget (trimmed when it comes back): a quarter of
                slot = self._new_slot(nbytes)  # the fresh float32 segment it spares
        if slot is None:
            return None
        slot.allocated, slot.scaled = True, scaled
        return tensor_on(slot.storage, dtype, shape)

    def _free_slot(self, nbytes: int) -> _Slot | None:
        """A free slot of ``nbytes`` or a new one within the budget; None if neither."""
        free = [s for s in self.slots.values() if not s.exports and not s.allocated]
        fits = [s for s in free if nbytes <= s.storage.nbytes() <= 2 * nbytes]
        if fits:
            return min(fits, key=lambda s: s.storage.nbytes())
        if free:  # a free slot of the wrong size is replaced: the pool grows only with use
            self._drop(min(free, key=lambda s: s.storage.nbytes()))
        if self._pooled() + _capacity(nbytes) > self._budget():
            return None
        return self._new_slot(nbytes)

    def _pooled(self) -> int:
        return sum(s.storage.nbytes() for s in self.slots.values())

    def _new_slot(self, nbytes: int) -> _Slot:
        slot = _Slot(self._numbers, new_shared(_capacity(nbytes)))
        self._numbers += 1
        self.slots[slot.storage.data_ptr()] = slot
        return slot

    def _budget(self) -> int:
        if self.budget is not None:
            return self.budget
        if self._claim is not None and self._claim.fits:  # the pool's slots take the batches
            return 0
        return slot_budget(max(self._batch_bytes, self._asked), self.prefetch_factor)

    def export(self, batch: Any) -> Exported:
        """Pickle ``batch`` for the main process, its slot tensors by reference."""
        self._batch_bytes, self._asked = max(self._batch_bytes, self._asked), 0
        out = io.BytesIO()
        self._in_batch.clear()
        self._new_storages, self._side = [], []
        claim = self._claim
        if claim is not None:
            claim.sent = False
        # no slots: nothing can refer to one, skip the per-object reference check
        slots = self.slots or (claim is not None and claim.slot is not None)
        pickler = _SlotPickler(out, self) if slots else BatchPickler(out)
        pickler.dump(batch)
        if claim is not None:
            claim.end_batch()
        for slot in list(self.slots.values()):
            if slot.number in self._in_batch:
                slot.exports += 1  # released once by the main process
                slot.allocated = False
            elif slot.allocated:  # built into but not sent: someone may still hold it
                self._drop(slot)
        dropped, self._dropped = tuple(self._dropped), []
        plain = not self.refers_to_slots
        if plain and (pickler.shares or self._side):
            return Exported(b"", dropped, plain, inline=batch)
        if not plain:
            storages, side = tuple(self._new_storages), tuple(self._side)
            return Exported(out.getvalue(), dropped, plain, storages=storages, side=side)
        with out.getbuffer() as pickled:  # copied into the ring, not into bytes first
            placed = self.ring.put(pickled)
        if placed is None:
            return Exported(out.getvalue(), dropped, plain, detached=True)
        if placed.storage is None and not dropped:
            return in_ring(placed.span)
        return Exported(b"", dropped, plain, True, placed.span, placed.storage)

    def slot_gauges(self) -> tuple[int, int]:
        """The slots this worker keeps and their bytes; with :attr:`reports_pool`, the
        loader's shared slots that batches have used too."""
        count = len(self.slots)
        nbytes = sum(s.storage.nbytes() for s in self.slots.values())
        if self.pool is not None and self.reports_pool:
            shared, shared_bytes = self.pool.touched()
            count, nbytes = count + shared, nbytes + shared_bytes
        return count, nbytes

    @property
    def refers_to_slots(self) -> bool:
        """Whether the batch :meth:`export` pickled last refers to slots (it holds them)."""
        return bool(self._in_batch) or (self._claim is not None and self._claim.sent)

    def _drop(self, slot: _Slot) -> None:
        del self.slots[slot.storage.data_ptr()]
        if slot.sent:
            self._dropped.append(slot.number)

    def _waited(self, seconds: float) -> None:
        counters = self.counters
        counters["slot_waits"] += 1
        counters["slot_wait_s"] += seconds
        counters["slot_wait_max_s"] = max(counters["slot_wait_max_s"], seconds)

    def _drain(self) -> None:
        """Take the main process's releases (never waiting for one). Free slots stay in the
        pool (within the budget): re-creating one costs its page faults again."""
        by_number = {s.number: s for s in self.slots.values()}
        while True:
            try:
                number = self.releases.get_nowait()
            except queue.Empty:
                return
            slot = by_number.get(number)
            if slot is not None:
                slot.exports -= 1
                if not slot.exports and self._pooled() > self._budget():
                    self._drop(slot)  # one made beyond the budget

    def reference(self, tensor: torch.Tensor) -> tuple[Any, ...] | None:
        """The persistent id of ``tensor`` if it lives in a slot (marks the slot sent)."""
        if self._claim is not None:
            pooled = self._claim.reference(tensor)
            if pooled is not None:
                return pooled
        slot = self.slots.get(tensor.untyped_storage().data_ptr())
        if slot is None:
            return None
        self._in_batch.add(slot.number)
        storage = None  # else its place in Exported.storages
        if not slot.sent:
            storage = len(self._new_storages)
            self._new_storages.append(slot.storage)
        slot.sent = True
        offset = tensor.storage_offset() * tensor.element_size()
        return ("stoker-slot", slot.number, storage, offset, tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype).removeprefix("torch."),
                slot.scaled)  # fmt: skip


class _SlotPickler(BatchPickler):
    def __init__(self, file: io.BytesIO, transport: WorkerTransport) -> None:
        super().__init__(file)
        self.transport = transport

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and obj.layout == torch.strided:
            reference = self.transport.reference(obj)
            if reference is not None:
                return reference
        if isinstance(obj, torch.Tensor):  # not in a slot: beside the payload (Exported.side)
            side = self.transport._side
            side.append(obj)
            return ("stoker-side", len(side) - 1)
        return None


def _capacity(nbytes: int) -> int:
    """Bytes of a new slot for ``nbytes``: room for slightly larger batches, whole pages."""
    return -(-nbytes * 17 // 16 // 4096) * 4096
