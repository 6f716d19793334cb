"""Finish images the decoder left to the batcher, straight into the batch's memory.

:class:`~stoker.media.image.JpegImage` items are decoded by libjpeg-turbo into a buffer each
thread reuses (its pages are warm: no fresh memory per image) as RGBX pixels; one vectorised
truncating cast per channel takes it into its plane of the batch (or scaled to float32), about
three times faster than copying from an HWC view. :class:`~stoker.media.image.FloatImage` items
are scaled there.
Up to :data:`THREADS` threads share the images of a batch: decoding and numpy's copies release
the GIL, so they run beside each other and beside the worker's Python work.

Example:
    >>> import numpy as np, torch
    >>> from stoker.media.image import FloatImage
    >>> out = np.zeros((1, 1, 2, 2), dtype=np.float32)
    >>> fill_images(out, [FloatImage(torch.full((1, 1, 2), 255, dtype=torch.uint8))], zeroed=True)
    >>> out[0, 0].tolist()
    [[1.0, 1.0], [0.0, 0.0]]
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.media.image import FloatImage, JpegImage

#: Threads that finish the images of one batch (per process).
THREADS = min(2, os.cpu_count() or 1)

_SCALE = np.float32(255.0)
_local = threading.local()
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): a forked child makes its own


def fill_images(target: npt.NDArray[Any], images: Sequence[Any], zeroed: bool) -> None:
    """Write each image into the top-left corner of ``target[i]``; zero the rest unless
    ``zeroed`` (the buffer is zero already). ``target``'s dtype is uint8 or float32."""
    chunks = [range(t, len(images), THREADS) for t in range(min(THREADS, len(images)))]

    def fill(indices: range) -> None:
        for i in indices:
            _fill_one(target[i], images[i])
            if not zeroed:
                zero_padding(target[i], tuple(images[i].shape))

    if len(chunks) <= 1:
        for chunk in chunks:
            fill(chunk)
        return
    for future in [_executor().submit(fill, chunk) for chunk in chunks]:
        future.result()  # re-raises the first failure (a damaged JPEG fails its batch)


def _fill_one(item: npt.NDArray[Any], image: JpegImage | FloatImage) -> None:
    if isinstance(image, JpegImage):
        _, height, width = image.shape
        planes = image.planes(_scratch("rgbx", 4 * height * width + 3))
        if planes is not None:
            for channel, plane in enumerate(planes):
                _put(item[channel, :height, :width], plane)
            return
        chw = image.hwc().transpose(2, 0, 1)  # damaged data that Pillow decodes
    else:  # a FloatImage (the batcher let only these two through)
        chw = image.pixels.numpy()
    _put(item[tuple(slice(0, s) for s in chw.shape)], chw)


def _put(region: npt.NDArray[Any], pixels: npt.NDArray[Any]) -> None:
    """Write uint8 ``pixels`` (or uint32 whose low byte is the pixel) into ``region``, as
    uint8 or scaled to float32 in [0, 1]."""
    if region.dtype == np.uint8:
        np.copyto(region, pixels, casting="unsafe")
        return
    if pixels.dtype != np.uint8:
        plane = _scratch("plane", pixels.size)[: pixels.size].reshape(pixels.shape)
        np.copyto(plane, pixels, casting="unsafe")
        pixels = plane
    np.divide(pixels, _SCALE, out=region)


def _scratch(name: str, nbytes: int) -> npt.NDArray[np.uint8]:
    """This thread's buffer ``name``, at least ``nbytes`` long (grown, never shrunk)."""
    buffer: npt.NDArray[np.uint8] | None = getattr(_local, name, None)
    if buffer is None or buffer.size < nbytes:
        buffer = np.empty(nbytes, dtype=np.uint8)
        setattr(_local, name, buffer)
    return buffer[:nbytes]


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(THREADS, thread_name_prefix="stoker-images"))
    return _pool[1]


def zero_padding(item: Any, shape: tuple[int, ...]) -> None:
    """Zero what lies outside the ``shape`` corner of ``item`` (only the padding is touched)."""
    for dim, size in enumerate(shape):
        if size < item.shape[dim]:
            index = (*(slice(0, s) for s in shape[:dim]), slice(size, None))
            item[index] = 0
