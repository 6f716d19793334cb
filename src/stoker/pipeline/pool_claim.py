"""A worker's claim on one slot of its loader's shared :class:`~stoker.pipeline.slot_pool.SlotPool`.

The batch a worker builds takes its large tensors from one pool slot, claimed with its first
tensor (once per batch: a claim that finds every slot held is not tried again for that batch).
Tensors are laid out one after the other, aligned; a tensor that would not fit turns the pool
off for this worker for good (its batches are that large: they take slots of its own, see
:mod:`stoker.pipeline.worker_transport`). A tensor of the claimed slot travels as a reference
(:meth:`PoolClaim.reference`); a slot claimed but not sent stays claimed: user code may hold a
tensor in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from stoker.pipeline.shared_tensors import tensor_on
from stoker.pipeline.slot_pool import SlotPool, aligned


class PoolClaim:
    """The pool slot of the batch being built (see module); ``waited`` gets the seconds a
    claim waited for the pool's table lock."""

    def __init__(self, pool: SlotPool, waited: Callable[[float], None]) -> None:
        self.pool = pool
        self._waited = waited
        #: Off for good after a batch too large for a pool slot.
        self.fits = True
        #: The batch pickled last refers to its pool slot.
        self.sent = False
        self.end_batch()

    def end_batch(self) -> None:
        """Forget the slot of the batch just pickled (not sent: it stays claimed, lost)."""
        self.slot: int | None = None  # claimed for the batch being built
        self.used = 0  # bytes of it handed out
        self.tried = False  # the batch being built asked the pool (once per batch)
        self._tensors: list[tuple[int, int, bool]] = []  # (start, end, scaled) pointers

    def buffer(
        self, worker: int, nbytes: int, shape: tuple[int, ...], dtype: torch.dtype, scaled: bool
    ) -> torch.Tensor | None:
        """A tensor in the batch's pool slot (claimed as ``worker`` with its first tensor), or
        None: the pool is full, or the batch too large for it."""
        pool, start = self.pool, self.used
        # Larger than a pool slot: slots of its own (for good: the batches are that large)
        if start + nbytes > pool.slot_bytes:
            self.fits = False
        if not self.fits:
            return None
        if self.slot is None and not self.tried:
            self.tried = True
            self.slot = pool.claim(worker)
            if pool.waited:
                self._waited(pool.waited)
        if self.slot is None:
            return None
        self.used = aligned(start + nbytes)
        pool.used(self.slot, self.used)
        tensor = tensor_on(pool.storages[self.slot], dtype, shape, start // dtype.itemsize)
        pointer = tensor.data_ptr()
        self._tensors.append((pointer, pointer + nbytes, scaled))
        return tensor

    def reference(self, tensor: torch.Tensor) -> tuple[Any, ...] | None:
        """The persistent id of ``tensor`` if it lies in the batch's pool slot: the slot, the
        tensor's byte offset and that of the allocation it is in (one float tensor per scaled
        one); else None."""
        if self.slot is None or self.pool.number(tensor.untyped_storage()) != self.slot:
            return None
        pointer = tensor.data_ptr()
        start, scaled = pointer, False
        for begin, end, is_scaled in self._tensors:
            if begin <= pointer < end:
                start, scaled = begin, is_scaled
                break
        self.sent = True
        base = tensor.untyped_storage().data_ptr()
        return ("stoker-pool", self.slot, pointer - base, tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype).removeprefix("torch."),
                scaled, start - base)  # fmt: skip
