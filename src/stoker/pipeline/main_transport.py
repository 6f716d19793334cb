"""The main process's side of the batch transport: batches rebuilt over the workers' slots.

:meth:`MainTransport.load` unpickles what a worker exported (:mod:`stoker.pipeline.exported`):
a tensor in a slot becomes a view of the main process's mapping of that slot, and when the last
view of a batch in a slot is freed (wherever the user kept it), the slot's number goes back to
its worker (:meth:`MainTransport.flush`), or, for a slot of the loader's shared pool, the slot is
freed once every batch tensor in it is. Float tensors sent as uint8 pixels stay empty until
:meth:`MainTransport.finish` scales them. See :mod:`stoker.pipeline.transport`.
"""

from __future__ import annotations

import collections
import io
import pickle
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from stoker.pipeline.exported import Exported
from stoker.pipeline.main_floats import FloatBuffers, as_uint8
from stoker.pipeline.payload_ring import RingReader
from stoker.pipeline.shared_tensors import tensor_on
from stoker.pipeline.slot_pool import SlotPool

#: The "worker" of a slot in a loader's shared :class:`SlotPool` (main-process keys).
POOL = -1


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
        unpickler = _SlotUnpickler(self, worker, exported)
        batch = unpickler.load()
        if unpickler.scalings:
            self.pending[id(batch)] = (batch, unpickler.scalings)
        return batch

    def hold(self, slot: tuple[int, int]) -> None:
        """Count one more batch tensor (or pending scaling) in ``slot`` if it is a pool slot
        (a worker's own slot goes back with each of its batches' views instead)."""
        if slot[0] == POOL:
            with self._holding:
                self.holds[slot[1]] += 1

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


class _SlotUnpickler(pickle.Unpickler):
    """Unpickles one exported batch: its slot tensors by the references the worker wrote
    (:class:`~stoker.pipeline.worker_transport.WorkerTransport`'s ``reference``)."""

    def __init__(self, transport: MainTransport, worker: int, exported: Exported) -> None:
        super().__init__(io.BytesIO(exported.payload))
        self.transport, self.worker, self.exported = transport, worker, exported
        #: Per slot of this batch, the one view of it whose end releases the slot.
        self.regions: dict[tuple[int, int], torch.Tensor] = {}
        #: Per allocation of uint8 pixels (slot, start), the float tensor finish() fills.
        self.scaled: dict[tuple[tuple[int, int], int], torch.Tensor] = {}
        self.scalings: list[_Scaling] = []

    def persistent_load(self, pid: Any) -> torch.Tensor:
        kind = pid[0]
        if kind == "stoker-pool":
            _, number, offset, shape, stride, dtype_name, to_float, start = pid
            pool = self.transport.pool
            assert pool is not None
            array = pool.array(number)
            return self._tensor((POOL, number), array, start, offset, shape, stride, dtype_name,
                                to_float)  # fmt: skip
        if kind == "stoker-side":  # beside the payload (Exported.side)
            side: torch.Tensor = self.exported.side[pid[1]]
            return side
        _, number, storage, offset, shape, stride, dtype_name, to_float = pid
        key = (self.worker, number)
        storages = self.transport.storages
        if storage is not None:  # sent for the first time: its place in exported.storages
            mapped = self.exported.storages[storage]
            storages[key] = torch.empty(0, dtype=torch.uint8).set_(mapped).numpy()
        # (a worker's own slot holds one allocation of pixels: start 0)
        return self._tensor(key, storages[key], 0, offset, shape, stride, dtype_name, to_float)

    def _tensor(
        self,
        slot: tuple[int, int],
        array: np.ndarray[Any, Any],
        start: int,
        offset: int,
        shape: tuple[int, ...],
        stride: tuple[int, ...],
        dtype_name: str,
        to_float: bool,
    ) -> torch.Tensor:
        """The tensor at byte ``offset`` of ``slot`` (mapped as ``array``); ``to_float``: uint8
        pixels (contiguous) of the allocation at ``start``, scaled by ``finish()``."""
        transport = self.transport
        if to_float:
            tensor = self.scaled.get((slot, start))
            if tensor is None:
                tensor = self.scaled[slot, start] = torch.empty(0, dtype=torch.float32)
                self.scalings.append(_Scaling(tensor, as_uint8(array, offset, shape), slot))
                transport.hold(slot)
            return tensor
        region = self.regions.get(slot)
        if region is None:
            view = array[:]  # a new view: its end frees the slot
            weakref.finalize(view, transport.released.append, slot)
            transport.hold(slot)
            region = self.regions[slot] = torch.from_numpy(view)
        dtype = getattr(torch, dtype_name)
        return tensor_on(region.untyped_storage(), dtype, shape, offset // dtype.itemsize, stride)
