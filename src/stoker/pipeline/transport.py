"""Batches from dataloader workers to the main process through reused shared memory.

Torch sends each tensor of a batch through a new shared-memory segment: the worker allocates and
faults in fresh pages for every batch (about 1 ms per MB on a virtual machine: as much as
decoding the images). Here a worker builds its large batch tensors in a few *slots*, segments it
reuses once the main process has let go of the batch:

* a worker pickles each batch itself (:meth:`WorkerTransport.export`,
  :mod:`stoker.pipeline.worker_transport`); tensors that live in a slot travel as
  ``(slot, offset, shape, stride, dtype)``, the slot's storage only the first time (what it sends:
  :mod:`stoker.pipeline.exported`);
* the main process rebuilds them over its mapping of the slot (:meth:`MainTransport.load`,
  :mod:`stoker.pipeline.main_transport`) and, when the last tensor of that batch in the slot is
  freed (wherever the user kept it), sends the slot's number back; only then does the worker
  write into the slot again.

A slot a worker allocated but did not send (user code dropped or kept the tensor) is never
reused. Small tensors, and workers without a transport, use torch's own path.

With a :class:`~stoker.pipeline.slot_pool.SlotPool` (forked workers, automatic budget), the
workers build batches (float ones sent as uint8 too) in slots they share instead of in their
own (:mod:`stoker.pipeline.pool_claim`); a worker keeps slots of its own for batches larger
than a pool slot.

A worker never waits for a slot: where every slot is held (by batches the training loop keeps,
or that wait in the queue) it builds the batch in a fresh segment, as torch does, and counts
it (:attr:`WorkerTransport.counters`, the loader's ``stats().slot_fallbacks``).

Float image batches may travel as their uint8 pixels and be scaled in the main process (see
:mod:`stoker.pipeline.main_floats` and :func:`image_buffer`): a quarter of the shared memory.

This module holds where batch builders (:mod:`stoker.pipeline.batch`) take their memory from:
the transport :func:`activate` made this process's (:func:`batch_buffer`, :func:`image_buffer`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from stoker.pipeline import main_buffers
from stoker.pipeline.exported import Exported
from stoker.pipeline.main_transport import POOL, MainTransport
from stoker.pipeline.shared_tensors import new_shared, tensor_on
from stoker.pipeline.thread_workers import in_worker_process
from stoker.pipeline.worker_transport import (
    EXTRA_BATCHES,
    MIN_SLOT_BYTES,
    SLOT_COUNTERS,
    SLOTS_MB,
    WorkerTransport,
    slot_budget,
)

__all__ = [
    "EXTRA_BATCHES",
    "MIN_SLOT_BYTES",
    "POOL",
    "SLOTS_MB",
    "SLOT_COUNTERS",
    "Exported",
    "MainTransport",
    "WorkerTransport",
    "activate",
    "batch_buffer",
    "image_buffer",
    "slot_budget",
]

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
    return tensor_on(new_shared(math.prod(shape) * dtype.itemsize), dtype, shape), True


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
