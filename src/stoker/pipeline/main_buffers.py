"""Large batch buffers the main process reuses (``num_workers=0``, or batches built there).

A batch built in fresh memory (``calloc``) faults its pages in as it is written: on a virtual
machine about as much CPU as copying the pixels in (~0.1 ms per uint8 image of 512 px, four
times that for float32). Here the buffer of a batch that nobody holds any more serves the next
batch of about its size, its pages warm; the batcher is told it is not zeroed and zeroes the
padding itself (:func:`stoker.pipeline.batch_images.fill_images`).

A buffer goes back only when every tensor and array over it is freed (a ``weakref.finalize`` on
the one numpy view that torch's storage holds), so a batch the training loop keeps is never
written into. At most :data:`KEEP` free buffers are kept: the main process holds what it did
with fresh memory (the batch the loop holds and the one being built), plus one idle batch.

Example:
    >>> import torch
    >>> buffers = MainBuffers()
    >>> out, zeroed = buffers.tensor((4, 1 << 18), torch.uint8)
    >>> zeroed, out.shape
    (True, torch.Size([4, 262144]))
    >>> pointer = out.data_ptr()
    >>> del out  # freed: the next batch of about its size reuses its memory
    >>> again, zeroed = buffers.tensor((4, 1 << 18), torch.uint8)
    >>> zeroed, again.data_ptr() == pointer
    (False, True)
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import numpy.typing as npt
import torch

#: Smaller buffers come from ``calloc`` as before (their page faults are few).
MIN_BYTES = 1 << 20
#: Free buffers kept for the next batches.
KEEP = 1


class MainBuffers:
    """Free batch buffers of this process (see module)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._free: list[npt.NDArray[np.uint8]] = []

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, bool]:
        """A contiguous tensor of ``shape`` and ``dtype``, and whether it is zero-filled (a
        fresh buffer) or holds an earlier batch's values (a reused one)."""
        nbytes = math.prod(shape) * dtype.itemsize
        raw = self._take(nbytes)
        zeroed = raw is None
        if raw is None:
            raw = np.zeros(_capacity(nbytes), dtype=np.uint8)
        region = raw[:]  # the view torch's storage holds: its end gives ``raw`` back
        weakref.finalize(region, self._give_back, raw)
        storage = torch.from_numpy(region).untyped_storage()
        stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        return torch.empty(0, dtype=dtype).set_(storage, 0, shape, stride), zeroed

    def _take(self, nbytes: int) -> npt.NDArray[np.uint8] | None:
        """A free buffer for ``nbytes`` (not more than twice as large), or None.

        No lock: a buffer is given back by a finaliser, which may run in the middle of this
        (a garbage collection) in the same thread. The list is swapped out whole instead (one
        step under the GIL), so a buffer given back meanwhile lands in the new list.
        """
        free, self._free = self._free, []
        found = next((raw for raw in free if nbytes <= raw.nbytes <= 2 * nbytes), None)
        self._free.extend(raw for raw in free if raw is not found)
        return found

    def _give_back(self, raw: npt.NDArray[np.uint8]) -> None:
        self._free.append(raw)
        del self._free[: -self.keep or len(self._free)]  # the newest are kept


def _capacity(nbytes: int) -> int:
    """Bytes of a new buffer for ``nbytes``: room for slightly larger batches, whole pages."""
    return -(-nbytes * 17 // 16 // 4096) * 4096


#: This process's buffers (forked workers build their batches in shared memory instead).
MAIN_BUFFERS = MainBuffers()

__all__ = ["KEEP", "MAIN_BUFFERS", "MIN_BYTES", "MainBuffers"]
