"""Finish images the decoder left to the batcher, straight into the batch's memory.

:class:`~stoker.media.image.JpegImage` items are decoded by libjpeg-turbo into a buffer each
thread reuses (its pages are warm: no fresh memory per image) as RGBX pixels; one vectorised
truncating cast per channel takes it into its plane of the batch (or scaled to float32), in
about half the time of a copy from an HWC view (which moves one byte at a time).
:class:`~stoker.media.image.FloatImage` items are scaled there.
Up to :data:`THREADS` threads share the images of a batch where a process has cores to spare
(:func:`threads`): decoding and numpy's copies release the GIL, so they run beside each other.

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
import torch.utils.data

from stoker.media.image import FloatImage, JpegImage

#: The most threads that finish the images of one batch (per process; see :func:`threads`).
THREADS = 2

_SCALE = np.float32(255.0)
_local = threading.local()
#: (pid, threads, pool): a forked child decides and makes its own.
_pool: tuple[int, int, ThreadPoolExecutor | None] | None = None


def fill_images(target: npt.NDArray[Any], images: Sequence[Any], zeroed: bool) -> None:
    """Write each image into the top-left corner of ``target[i]``; zero the rest unless
    ``zeroed`` (the buffer is zero already). ``target``'s dtype is uint8 or float32."""
    count, pool = _process_pool()
    chunks = [range(t, len(images), count) for t in range(min(count, len(images)))]
    if pool is None or len(chunks) <= 1:
        for chunk in chunks:
            _fill(target, images, chunk, zeroed)
        return
    futures = [pool.submit(_fill, target, images, chunk, zeroed) for chunk in chunks]
    for future in futures:
        future.result()  # re-raises the first failure (a damaged JPEG fails its batch)


def _fill(target: npt.NDArray[Any], images: Sequence[Any], indices: range, zeroed: bool) -> None:
    """Fill the items ``indices`` of ``target`` (the loop of :func:`fill_images`, per image a
    few Python operations: it runs for every image of every batch)."""
    if target.ndim != 4:  # grey FloatImages: (H, W) items
        for i in indices:
            _fill_one(target[i], images[i])
            if not zeroed:
                zero_padding(target[i], tuple(images[i].shape))
        return
    _, _, max_height, max_width = target.shape
    as_uint8 = target.dtype == np.uint8
    for i in indices:
        item, image = target[i], images[i]
        _, height, width = image.shape
        if as_uint8 and type(image) is JpegImage:
            planes = image.planes(_scratch("rgbx", 4 * height * width + 3))
            if planes is None:  # damaged data that Pillow decodes
                _fill_one(item, image)
            else:
                np.copyto(item[:, :height, :width], planes, casting="unsafe")
        else:
            _fill_one(item, image)
        if not zeroed:  # the padding a reused slot holds old pixels in
            if height < max_height:
                item[:, height:] = 0
            if width < max_width:
                item[:, :height, width:] = 0


def _fill_one(item: npt.NDArray[Any], image: JpegImage | FloatImage) -> None:
    if isinstance(image, JpegImage):
        _, height, width = image.shape
        planes = image.planes(_scratch("rgbx", 4 * height * width + 3))
        if planes is not None:
            _put(item[:, :height, :width], planes)
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
        plane = _scratch("plane", pixels.size).reshape(pixels.shape)
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


def threads() -> int:
    """Threads this process decodes a batch's images with: up to :data:`THREADS`, but no more
    than the cores each dataloader worker has to itself. Workers that fill the cores already
    decode side by side; a thread each would add only its memory (a decode buffer, a malloc
    arena) and switches.

    Example:
        >>> 1 <= threads() <= THREADS
        True
    """
    return _process_pool()[0]


def _process_pool() -> tuple[int, ThreadPoolExecutor | None]:
    """This process's thread count and pool (None for one thread), made on first use."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        info = torch.utils.data.get_worker_info()
        workers = info.num_workers if info is not None else 1
        count = max(1, min(THREADS, _cores() // workers))
        pool = ThreadPoolExecutor(count, thread_name_prefix="stoker-images") if count > 1 else None
        _pool = (os.getpid(), count, pool)
    return _pool[1], _pool[2]


def _cores() -> int:
    """The cores this process may run on (its affinity: ``taskset`` narrows it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def zero_padding(item: Any, shape: tuple[int, ...]) -> None:
    """Zero what lies outside the ``shape`` corner of ``item`` (only the padding is touched)."""
    for dim, size in enumerate(shape):
        if size < item.shape[dim]:
            index = (*(slice(0, s) for s in shape[:dim]), slice(size, None))
            item[index] = 0
