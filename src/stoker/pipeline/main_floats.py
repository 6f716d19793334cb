"""Float image batches made in the main process from the uint8 pixels a worker sent.

A float32 batch of images is four times its uint8 pixels. Where no user code sees a batch
between batching and the main process (:func:`stoker.pipeline.transport.WorkerTransport`'s
``floats_as_uint8``), a worker builds the batch as uint8 in its shared-memory slot and the main
process scales it to float32 in [0, 1] when the batch is handed out
(:meth:`~stoker.pipeline.transport.MainTransport.finish`): a quarter of the shared memory per
batch in flight (a worker keeps ``prefetch_factor`` of them), the same values (``pixels / 255``
in float32, as the worker would compute), and the uint8 slot goes back to its worker at once.

The float batches live in :class:`FloatBuffers`: buffers whose pages stay mapped and are reused
once the user lets go of a batch. A fresh 100 MB buffer costs ~0.4 s of page faults on a
virtual machine, more than the scaling itself (~20 ms).

Example:
    >>> import numpy as np
    >>> buffers = FloatBuffers()
    >>> batch = buffers.scaled(np.full((2, 3), 255, dtype=np.uint8))
    >>> batch.dtype, batch.max().item()
    (torch.float32, 1.0)
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

_SCALE = np.float32(255.0)
#: Free buffers kept for the next batches (the user's batch and the one arriving are in use).
KEEP = 1
#: Elements :func:`scale_into` casts and divides at a time (256 kB of float32: L2-sized).
CHUNK = 1 << 16


class FloatBuffers:
    """Reused float32 buffers of the main process (thread-safe: batches may arrive on the pin
    thread and be freed on any thread)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._free: list[npt.NDArray[np.float32]] = []
        self._lock = threading.Lock()

    def scaled(self, pixels: npt.NDArray[np.uint8]) -> torch.Tensor:
        """``pixels / 255`` as a float32 tensor of the same shape, in a reused buffer."""
        size = pixels.size
        flat = self._take(size)
        view = flat[:size].reshape(pixels.shape)  # a new view: its end gives the buffer back
        weakref.finalize(view, self._give_back, flat)
        scale_into(view, pixels)
        return torch.from_numpy(view)

    def _take(self, size: int) -> npt.NDArray[np.float32]:
        with self._lock:
            fits = [i for i, b in enumerate(self._free) if size <= b.size <= 2 * size]
            if fits:  # (by index: numpy arrays do not compare as list items)
                return self._free.pop(min(fits, key=lambda i: self._free[i].size))
        return np.empty(size * 17 // 16, dtype=np.float32)  # room for slightly larger batches

    def _give_back(self, flat: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._free.append(flat)
            if len(self._free) > self.keep:  # the smallest goes: batches only grow to a bound
                self._free.pop(min(range(len(self._free)), key=lambda i: self._free[i].size))

    @property
    def free_bytes(self) -> int:
        """Bytes of the free buffers (for the memory budget's accounting)."""
        with self._lock:
            return sum(b.nbytes for b in self._free)


def scale_into(out: npt.NDArray[np.float32], pixels: npt.NDArray[np.uint8]) -> None:
    """``out[...] = pixels / 255`` in float32, the values of ``np.divide(pixels, 255)``.

    Contiguous arrays are done :data:`CHUNK` elements at a time, each cast and then divided in
    place while it is in the cache: about 20 % less time than numpy's buffered divide of uint8
    by float32, which is most of what the main process spends on a float batch.

    Example:
        >>> out = np.empty(3, dtype=np.float32)
        >>> scale_into(out, np.array([0, 51, 255], dtype=np.uint8))
        >>> out.tolist()
        [0.0, 0.20000000298023224, 1.0]
    """
    if not (out.flags.c_contiguous and pixels.flags.c_contiguous) or out.shape != pixels.shape:
        np.divide(pixels, _SCALE, out=out)
        return
    flat_out, flat_in = out.reshape(-1), pixels.reshape(-1)
    for start in range(0, flat_out.size, CHUNK):
        chunk = flat_out[start : start + CHUNK]
        np.copyto(chunk, flat_in[start : start + CHUNK])
        np.divide(chunk, _SCALE, out=chunk)


def as_uint8(storage: Any, offset: int, shape: tuple[int, ...]) -> npt.NDArray[np.uint8]:
    """The contiguous uint8 array of ``shape`` at byte ``offset`` of a slot's numpy ``storage``."""
    count = int(np.prod(shape))
    flat: npt.NDArray[np.uint8] = storage[offset : offset + count]
    return flat.reshape(shape)
