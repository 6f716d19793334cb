"""The main process's last step for GPU image modes: decode each batch's compressed images.

Workers send the images of a GPU image mode compressed (:mod:`stoker.media.gpu_images`); the
loader hands every batch to :func:`finish_gpu_images` before yielding it, which replaces each
:class:`~stoker.media.gpu_images.CompressedImages` (in dicts, dataclasses such as ``Batch``,
lists and tuples) by its decoded CUDA tensor. Saved state is untouched: positions are counted
in samples, not pixels.

Example:
    >>> finish_gpu_images({"txt": ["a", "b"]})
    {'txt': ['a', 'b']}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from stoker.media.gpu_image_decoder import decode_on_gpu
from stoker.media.gpu_images import CompressedImages


def gpu_image_hook(dataset: Any) -> Callable[[Any], Any] | None:
    """:func:`finish_gpu_images` where the loader's decoder keeps images for the GPU, else None."""
    decoder = getattr(getattr(dataset, "task_encoder", None), "decoder", None)
    return finish_gpu_images if getattr(decoder, "gpu_images", False) else None


def finish_gpu_images(batch: Any) -> Any:
    """``batch`` with every :class:`CompressedImages` in it decoded on its GPU."""
    return _finish(batch)


def _finish(value: Any) -> Any:
    if isinstance(value, CompressedImages):
        return decode_on_gpu(value)
    if isinstance(value, dict):
        return {k: _finish(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            new = _finish(old)
            if new is not old:
                object.__setattr__(value, field.name, new)  # frozen batches too
        return value
    if isinstance(value, list) and any(_holds(v) for v in value):
        return [_finish(v) for v in value]
    if isinstance(value, tuple) and any(_holds(v) for v in value):
        items = [_finish(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value


def _holds(value: Any) -> bool:
    """Whether ``value`` may hold compressed images (a container or one itself)."""
    return isinstance(value, (CompressedImages, dict, list, tuple)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    )
