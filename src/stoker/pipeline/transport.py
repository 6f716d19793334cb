"""Batches from dataloader workers to the main process through reused shared memory.

Torch sends each tensor of a batch through a new shared-memory segment: the worker allocates and
faults in fresh pages for every batch (about 1 ms per MB on a virtual machine: as much as
decoding the images). Here a worker builds its large batch tensors in a few *slots*, segments it
reuses once the main process has let go of the batch:

* a worker pickles each batch itself (:meth:`WorkerTransport.export`); tensors that live in a
  slot travel as ``(slot, offset, shape, stride, dtype)``, the slot's storage only the first time;
* the main process rebuilds them over its mapping of the slot (:meth:`MainTransport.load`) and,
  when the last tensor of that batch in the slot is freed (wherever the user kept it), sends the
  slot's number back; only then does the worker write into the slot again.

A slot a worker allocated but did not send (user code dropped or kept the tensor) is never
reused. Small tensors, and workers without a transport, use torch's own path.

With a :class:`~stoker.pipeline.slot_pool.SlotPool` (forked workers, automatic budget), the
workers build batches (float ones sent as uint8 too) in slots they share instead of in their
own; a worker keeps slots of its own for batches larger than a pool slot.

A worker never waits for a slot: where every slot is held (by batches the training loop keeps,
or that wait in the queue) it builds the batch in a fresh segment, as torch does, and counts
it (:attr:`WorkerTransport.counters`, the loader's ``stats().slot_fallbacks``).

Float image batches may travel as their uint8 pixels and be scaled in the main process (see
:mod:`stoker.pipeline.main_floats` and :func:`image_buffer`): a quarter of the shared memory.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import queue
import threading
import weakref
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.utils.data

from stoker.pipeline import main_buffers
from stoker.pipeline.batch_pickler import BatchPickler
from stoker.pipeline.main_floats import FloatBuffers, as_uint8
from stoker.pipeline.payload_ring import PayloadRing, RingReader
from stoker.pipeline.slot_pool import SlotPool, aligned
from stoker.pipeline.thread_workers import in_worker_process
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
#: The "worker" of a slot in a loader's shared :class:`SlotPool` (main-process keys).
POOL = -1
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


@dataclass(frozen=True)
class Exported:
    """A batch pickled by a worker, its slot tensors by reference."""

    payload: bytes
    #: Slots the worker has let go of since its last batch (the main process unmaps them).
    dropped: tuple[int, ...] = ()
    #: The batch refers to no slot (a plain pickle: loaded without a per-object hook).
    plain: bool = False
    #: The batch refers to nothing its worker serves (no slot, no shared tensor or file
    #: descriptor): it may be loaded any time later (see :mod:`stoker.pipeline.batch_pickler`).
    detached: bool = False
    #: Where the payload lies in the worker's payload ring (then ``payload`` is empty; see
    #: :mod:`stoker.pipeline.payload_ring`), else None.
    span: tuple[int, int, int] | None = None
    #: The worker's ring storage, with its first ring payload.
    ring: Any = None
    #: A plain batch that shares tensors or file descriptors, sent as itself (``payload`` is
    #: empty): the queue's pickler shares them and the main process takes them over as the
    #: message arrives, while the worker still serves them. A payload could be loaded only
    #: after the worker is gone: the data loader lets a worker exit once its last message has
    #: arrived, even where earlier ones of it wait for their turn.
    inline: Any = None
    #: The slot storages the batch is the first to use, sent beside the payload for the same
    #: reason: the main process maps them as the message arrives.
    storages: tuple[torch.UntypedStorage, ...] = ()
    #: The batch's tensors outside slots (torch shares them), beside the payload likewise.
    side: tuple[torch.Tensor, ...] = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.span is not None and self.ring is None and not self.dropped:
            return in_ring, (self.span,)  # most batches of small samples: their span only
        # by its fields in order (one call to rebuild), not by a state dict: one per batch
        return Exported, (self.payload, self.dropped, self.plain, self.detached, self.span,
                          self.ring, self.inline, self.storages, self.side)  # fmt: skip


#: The fields of a batch in its worker's payload ring, but its span (see :func:`in_ring`).
_IN_RING = {f.name: f.default for f in fields(Exported)}
_IN_RING.update(payload=b"", plain=True, detached=True)


def in_ring(span: tuple[int, int, int]) -> Exported:
    """``Exported(b"", (), True, True, span)``: a plain batch at ``span`` of its worker's
    payload ring (the ring sent before), made without the frozen ``__init__`` (a third of the
    CPU; one is made and sent per batch).

    Example:
        >>> in_ring((0, 500, 500)) == Exported(b"", (), True, True, (0, 500, 500))
        True
    """
    made = _new(Exported)
    _set_attr(made, "__dict__", {**_IN_RING, "span": span})
    return made


_new = object.__new__
_set_attr = object.__setattr__


@dataclass
class _Slot:
    number: int
    storage: torch.UntypedStorage
    sent: bool = False  # the main process has the storage
    exports: int = 0  # batches referring to the slot that the main process has not released
    allocated: bool = False  # handed out for the batch being built
    scaled: bool = False  # uint8 pixels of a float batch: the main process scales them


class WorkerTransport:
    """A worker's slots; :func:`batch_buffer` allocates from the active one."""

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
        self._pool_slot: int | None = None  # claimed for the batch being built
        self._pool_used = 0  # bytes of it handed out
        self._pool_tensors: list[tuple[int, int, bool]] = []  # (start, end, scaled) pointers
        self._pool_tried = False  # the batch being built asked the pool (once per batch)
        self._fits_pool = True  # off for good after a batch too large for a pool slot
        self._pool_sent = False  # the batch pickled last refers to its pool slot
        #: No user code sees a batch between batching and export: float image batches may be
        #: built as uint8 and scaled by the main process (:func:`image_buffer`).
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
        ``scaled``: uint8 pixels the main process makes float32 (see :func:`image_buffer`)."""
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_SLOT_BYTES:
            return None
        self._asked += nbytes
        if self.pool is not None:
            pooled = self._pool_buffer(nbytes, shape, dtype, scaled)
            if pooled is not None:
                return pooled
        self._drain()
        slot = self._free_slot(nbytes)
        reuses = self._budget() > 0 or self._pool_tried  # else the user turned reuse off
        if slot is None and reuses:  # every slot is held: fresh memory
            self.counters["slot_fallbacks"] += 1
            if scaled:  # a slot beyond the budget (trimmed when it comes back): a quarter of
                slot = self._new_slot(nbytes)  # the fresh float32 segment it spares
        if slot is None:
            return None
        slot.allocated, slot.scaled = True, scaled
        return _tensor_on(slot.storage, dtype, shape)

    def _pool_buffer(
        self, nbytes: int, shape: tuple[int, ...], dtype: torch.dtype, scaled: bool
    ) -> torch.Tensor | None:
        """A tensor in the batch's pool slot (claimed with its first tensor), or None."""
        assert self.pool is not None
        start = self._pool_used
        # Larger than a pool slot: slots of its own (for good: the batches are that large)
        if start + nbytes > self.pool.slot_bytes:
            self._fits_pool = False
        if not self._fits_pool:
            return None
        if self._pool_slot is None and not self._pool_tried:
            self._pool_tried = True
            self._pool_slot = self.pool.claim(self.worker)
            if self.pool.waited:
                self._waited(self.pool.waited)
        if self._pool_slot is None:
            return None
        self._pool_used = aligned(start + nbytes)
        self.pool.used(self._pool_slot, self._pool_used)
        storage = self.pool.storages[self._pool_slot]
        tensor = _tensor_on(storage, dtype, shape, start // dtype.itemsize)
        pointer = tensor.data_ptr()
        self._pool_tensors.append((pointer, pointer + nbytes, scaled))
        return tensor

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
        slot = _Slot(self._numbers, _new_shared(_capacity(nbytes)))
        self._numbers += 1
        self.slots[slot.storage.data_ptr()] = slot
        return slot

    def _budget(self) -> int:
        if self.budget is not None:
            return self.budget
        if self.pool is not None and self._fits_pool:  # the pool's slots take the batches
            return 0
        return slot_budget(max(self._batch_bytes, self._asked), self.prefetch_factor)

    def export(self, batch: Any) -> Exported:
        """Pickle ``batch`` for the main process, its slot tensors by reference."""
        self._batch_bytes, self._asked = max(self._batch_bytes, self._asked), 0
        out = io.BytesIO()
        self._in_batch.clear()
        self._new_storages, self._side = [], []
        self._pool_sent = False
        # no slots: nothing can refer to one, skip the per-object reference check
        slots = self.slots or self._pool_slot is not None
        pickler = _SlotPickler(out, self) if slots else BatchPickler(out)
        pickler.dump(batch)
        # a pool slot not sent stays claimed (user code may hold a tensor in it): lost
        self._pool_slot, self._pool_used, self._pool_tried = None, 0, False
        self._pool_tensors.clear()
        for slot in list(self.slots.values()):
            if slot.number in self._in_batch:
                slot.exports += 1  # released once by the main process
                slot.allocated = False
            elif slot.allocated:  # built into but not sent: someone may still hold it
                self._drop(slot)
        dropped, self._dropped = tuple(self._dropped), []
        plain = not self._in_batch and not self._pool_sent
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
        return bool(self._in_batch) or self._pool_sent

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
        if self._pool_slot is not None:
            assert self.pool is not None
            if self.pool.number(tensor.untyped_storage()) == self._pool_slot:
                return self._pool_reference(tensor)
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

    def _pool_reference(self, tensor: torch.Tensor) -> tuple[Any, ...]:
        """The persistent id of ``tensor`` in the batch's pool slot: the slot, the tensor's
        byte offset and that of the allocation it is in (one float tensor per scaled one)."""
        pointer = tensor.data_ptr()
        start, scaled = pointer, False
        for begin, end, is_scaled in self._pool_tensors:
            if begin <= pointer < end:
                start, scaled = begin, is_scaled
                break
        self._pool_sent = True
        base = tensor.untyped_storage().data_ptr()
        return ("stoker-pool", self._pool_slot, pointer - base, tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype).removeprefix("torch."),
                scaled, start - base)  # fmt: skip


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


class MainTransport:
    """The main process's side: slot mappings per worker and the queues that release slots."""

    def __init__(self, context: Any, workers: int, pool: SlotPool | None = None) -> None:
        self.queues = [context.Queue() for _ in range(workers)]
        #: Slots shared by the workers (made before they start), and the tensors or pending
        #: scalings per pool slot the main process holds.
        self.pool = pool
        self.holds: collections.Counter[int] = collections.Counter()
        self._holding = threading.Lock()  # flush() runs on the pin thread too
        self.storages: dict[tuple[int, int], np.ndarray[Any, Any]] = {}
        self.released: collections.deque[tuple[int, int]] = collections.deque()
        self.floats = FloatBuffers()  # float batches scaled from uint8 slots
        #: Per loaded batch (by id; the batch is kept): float tensors still to scale (see
        #: :meth:`finish`), with their uint8 pixels and slot.
        self.pending: dict[int, tuple[Any, list[_Scaling]]] = {}
        self.rings: dict[int, RingReader] = {}  # by worker

    def load(self, worker: int, exported: Exported) -> Any:
        """Rebuild a worker's batch; its slots go back when its tensors are freed.

        Float tensors sent as uint8 pixels are empty until :meth:`finish`: a batch that waits
        for its turn holds its worker's uint8 slot, not four times as much float memory."""
        self.flush()
        for number in exported.dropped:
            self.storages.pop((worker, number), None)
        if exported.ring is not None:
            self.rings[worker] = RingReader(exported.ring)
        if exported.span is not None:  # in the worker's ring: read in the order written
            ring = self.rings[worker]
            try:
                return pickle.loads(ring.view(exported.span))
            finally:
                ring.done(exported.span)
        if exported.inline is not None:
            return exported.inline
        if exported.plain:
            return pickle.loads(exported.payload)
        regions: dict[int, torch.Tensor] = {}
        scaled: dict[int, torch.Tensor] = {}

        def persistent_load(pid: Any) -> torch.Tensor:
            if pid[0] == "stoker-pool":
                return pool_load(pid)
            if pid[0] == "stoker-side":
                side: torch.Tensor = exported.side[pid[1]]
                return side
            _, number, storage, offset, shape, stride, dtype_name, to_float = pid
            key = (worker, number)
            if storage is not None:  # its place in exported.storages
                mapped = exported.storages[storage]
                self.storages[key] = torch.empty(0, dtype=torch.uint8).set_(mapped).numpy()
            if to_float:  # uint8 pixels (contiguous), scaled by finish()
                if number not in scaled:
                    scaled[number] = torch.empty(0, dtype=torch.float32)
                    pixels = as_uint8(self.storages[key], offset, shape)
                    scalings.append(_Scaling(scaled[number], pixels, key))
                return scaled[number]
            if number not in regions:
                region = self.storages[key][:]  # a new view: its end frees the slot
                weakref.finalize(region, self.released.append, key)
                regions[number] = torch.from_numpy(region)
            dtype = getattr(torch, dtype_name)
            flat = regions[number].untyped_storage()
            return _tensor_on(flat, dtype, shape, offset // dtype.itemsize, stride)

        pool_regions: dict[int, torch.Tensor] = {}
        pool_scaled: dict[tuple[int, int], torch.Tensor] = {}

        def pool_load(pid: Any) -> torch.Tensor:
            _, number, offset, shape, stride, dtype_name, to_float, start = pid
            assert self.pool is not None
            if to_float:  # uint8 pixels (contiguous), scaled by finish()
                if (number, start) not in pool_scaled:
                    pool_scaled[number, start] = torch.empty(0, dtype=torch.float32)
                    pixels = as_uint8(self.pool.array(number), offset, shape)
                    scalings.append(_Scaling(pool_scaled[number, start], pixels, (POOL, number)))
                    with self._holding:
                        self.holds[number] += 1
                return pool_scaled[number, start]
            if number not in pool_regions:
                region = self.pool.array(number)[:]  # a new view: its end frees the slot
                weakref.finalize(region, self.released.append, (POOL, number))
                with self._holding:
                    self.holds[number] += 1
                pool_regions[number] = torch.from_numpy(region)
            dtype = getattr(torch, dtype_name)
            flat = pool_regions[number].untyped_storage()
            return _tensor_on(flat, dtype, shape, offset // dtype.itemsize, stride)

        scalings: list[_Scaling] = []
        unpickler = pickle.Unpickler(io.BytesIO(exported.payload))
        unpickler.persistent_load = persistent_load  # type: ignore[method-assign]
        batch = unpickler.load()
        if scalings:
            self.pending[id(batch)] = (batch, scalings)
        return batch

    def finish(self, batch: Any) -> None:
        """Scale the float tensors of a loaded batch (sent as uint8) into reused float buffers
        and give their slots back. Call it before anyone reads the batch; once per batch."""
        _, scalings = self.pending.pop(id(batch), (None, []))
        for scaling in scalings:
            floats = self.floats.scaled(scaling.pixels)
            scaling.tensor.set_(floats.untyped_storage(), 0, floats.shape, floats.stride())
            self.released.append(scaling.slot)

    def flush(self) -> None:
        """Send the numbers of the released slots to their workers."""
        while self.released:
            worker, number = self.released.popleft()
            if worker != POOL:
                self.queues[worker].put(number)
                continue
            with self._holding:
                self.holds[number] -= 1
                if self.holds[number] > 0:
                    continue
                del self.holds[number]  # the batch in it is freed (and scaled) everywhere
            assert self.pool is not None
            self.pool.free(number)

    def close(self) -> None:
        self.pending.clear()
        self.rings.clear()
        for q in self.queues:
            q.cancel_join_thread()
            q.close()


@dataclass(frozen=True)
class _Scaling:
    tensor: torch.Tensor  # float32, empty until finished
    pixels: np.ndarray[Any, Any]  # uint8, in the slot
    slot: tuple[int, int]  # (worker, slot number)


_active: WorkerTransport | None = None


def activate(transport: WorkerTransport | None) -> None:
    """Make ``transport`` the one :func:`batch_buffer` allocates from in this process."""
    global _active
    _active = transport


def batch_buffer(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
    """A tensor to build a batch in, and whether it is zero-filled already.

    In a worker with a transport: a reused slot (not zeroed). In another worker: a fresh
    shared-memory segment (zero; reaches the main process without a copy). In the main process:
    a large batch reuses the memory of one nobody holds any more (not zeroed; its pages are
    warm, see :mod:`stoker.pipeline.main_buffers`), a smaller one ``calloc``'d memory (zero).
    """
    if not in_worker_process():  # the training process (its thread workers too)
        if math.prod(shape) * dtype.itemsize >= main_buffers.MIN_BYTES:
            return main_buffers.MAIN_BUFFERS.tensor(shape, dtype)
        if dtype in (torch.bfloat16, torch.complex32):  # no numpy equivalent
            return torch.zeros(shape, dtype=dtype), True
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        return torch.from_numpy(np.zeros(shape, dtype=np_dtype)), True
    if _active is not None:
        pooled = _active.buffer(shape, dtype)
        if pooled is not None:
            return pooled, False
    return _tensor_on(_new_shared(math.prod(shape) * dtype.itemsize), dtype, shape), True


def _capacity(nbytes: int) -> int:
    """Bytes of a new slot for ``nbytes``: room for slightly larger batches, whole pages."""
    return -(-nbytes * 17 // 16 // 4096) * 4096


def image_buffer(shape: tuple[int, ...], as_float: bool) -> tuple[torch.Tensor, bool]:
    """A batch of images to fill with uint8 pixels, and whether it is zero-filled already.

    Its dtype is float32 where ``as_float``, except in a worker whose transport has
    ``floats_as_uint8``: then uint8, in a slot the main process scales to float32 on arrival
    (:mod:`stoker.pipeline.main_floats`). Fill it with
    :func:`stoker.pipeline.batch_images.fill_images`, which writes either dtype.
    """
    if as_float and _active is not None and _active.floats_as_uint8:
        pooled = _active.buffer(shape, torch.uint8, scaled=True)
        if pooled is not None:
            return pooled, False
    return batch_buffer(shape, torch.float32 if as_float else torch.uint8)


def _new_shared(nbytes: int) -> torch.UntypedStorage:
    """A new shared-memory segment (zero-filled: a fresh file), as torch's collate makes."""
    return torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call,no-any-return]


def _tensor_on(
    storage: torch.UntypedStorage,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    offset: int = 0,
    stride: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """A tensor over ``storage`` (``offset`` in elements; contiguous unless ``stride``)."""
    if stride is None:
        stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
