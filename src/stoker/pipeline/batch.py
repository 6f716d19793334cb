"""Batching: turn a list of samples into one batch, field by field (Energon's semantics).

Tensors are zero-padded to the largest shape and stacked (their dtype is kept: uint8 images stay
uint8); dicts, dataclasses and named tuples are batched field by field; anything else becomes a
list. ``Sample`` metadata is batched to lists (``__subflavors__`` stays one dict per sample).

Example:
    >>> import torch
    >>> batch_pad_stack([torch.ones(2), torch.ones(3)]).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any

import torch
import torch.utils.data

from stoker.errors import StokerError
from stoker.media.gpu_images import CompressedImage, compressed_batch
from stoker.media.image import DEFERRED_IMAGES, FloatImage, JpegImage
from stoker.pipeline.batch_images import fill_images, zero_padding
from stoker.pipeline.transport import batch_buffer, image_buffer

FeatureBatcher = Callable[[list[Any]], Any]


def batch_stack(batch: list[Any]) -> Any:
    """Stack same-shaped tensors along a new first dimension."""
    return torch.stack(batch, dim=0)


def batch_pad_stack(batch: list[Any]) -> Any:
    """Stack tensors of any shapes (same number of dimensions), padding with zeros at the end.

    :class:`~stoker.media.image.FloatImage` items are scaled to float32 in [0, 1] on the way;
    :class:`~stoker.media.image.JpegImage` items are decoded straight into the batch.

    Example:
        >>> batch_pad_stack([torch.ones(1, 2), torch.ones(2, 1)]).shape
        torch.Size([2, 2, 2])
    """
    if any(isinstance(b, CompressedImage) for b in batch):  # decoded by the main process
        return compressed_batch(batch)
    ndim = len(batch[0].shape)
    if any(len(b.shape) != ndim for b in batch):
        shapes = [tuple(b.shape) for b in batch]
        raise StokerError(f"cannot pad-stack tensors with different numbers of dims: {shapes}.")
    max_size = [max(b.shape[dim] for b in batch) for dim in range(ndim)]
    if any(isinstance(b, DEFERRED_IMAGES) for b in batch):
        return _deferred_images(batch, max_size)
    if not all(_numpy_copyable(b, batch[0].dtype) for b in batch):
        out = batch[0].new_zeros((len(batch), *max_size))
        for i, b in enumerate(batch):
            out[_region(i, b.shape)] = b
        return out
    # numpy copies strided views (e.g. HWC images seen as CHW) 10-30x faster than torch's
    # multi-threaded indexing. Where the buffer is zero already, only the samples are written.
    out, zeroed = batch_buffer((len(batch), *max_size), batch[0].dtype)
    target = out.numpy()
    for i, b in enumerate(batch):
        target[_region(i, b.shape)] = b.numpy()
        if not zeroed:
            zero_padding(target[i], tuple(b.shape))
    return out


def _deferred_images(images: list[Any], max_size: list[int]) -> torch.Tensor:
    """Pad-stack images the decoder left to the batcher, finishing them in the batch's memory.

    A blend may mix them with tensors (from sources where user code sees samples), or uint8
    with float ones: then each is made a tensor first.
    """
    floats = {
        isinstance(i, FloatImage) or (isinstance(i, JpegImage) and i.as_float) for i in images
    }
    if not all(isinstance(i, DEFERRED_IMAGES) for i in images) or len(floats) > 1:
        mixed: torch.Tensor = batch_pad_stack([_as_tensor(image) for image in images])
        return mixed
    out, zeroed = image_buffer((len(images), *max_size), as_float=floats.pop())
    fill_images(out.numpy(), images, zeroed)
    return out


def _as_tensor(value: Any) -> Any:
    return value.tensor() if isinstance(value, DEFERRED_IMAGES) else value


def _region(i: int, shape: Sequence[int]) -> tuple[Any, ...]:
    """Index of item ``i``'s top-left region of ``shape`` in a padded batch."""
    return (i, *(slice(0, s) for s in shape))


def _numpy_copyable(t: torch.Tensor, dtype: torch.dtype) -> bool:
    return (
        t.dtype == dtype
        and t.device.type == "cpu"
        and not t.requires_grad
        and dtype not in (torch.bfloat16, torch.complex32)
        and not t.is_conj()
        and not t.is_neg()
    )


def batch_list(batch: list[Any]) -> Any:
    """Keep the values as a list."""
    return batch


def generic_batch(batch: list[Any]) -> Any:
    """Batch by type: pad-stack tensors, recurse into dicts, dataclasses and named tuples,
    list everything else.

    A dataclass with a ``from_samples`` classmethod (e.g. a ``Batch``) builds itself.

    Example:
        >>> generic_batch([{"x": torch.zeros(2), "s": "a"}, {"x": torch.ones(1), "s": "b"}])
        {'x': tensor([[0., 0.],
                [1., 0.]]), 's': ['a', 'b']}
    """
    first = batch[0]
    if isinstance(first, (torch.Tensor, *DEFERRED_IMAGES)):
        return batch_pad_stack(batch)
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        if hasattr(first, "from_samples"):
            return first.from_samples(batch)
        return batch_samples(batch, type(first))
    if isinstance(first, dict):
        return batch_samples(batch, type(first))
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return batch_samples(batch, type(first))
    return batch_list(batch)


def batch_samples(
    samples: Sequence[Any],
    result_type: type[Any] | None = None,
    actions: Mapping[str, FeatureBatcher] | None = None,
    default_action: FeatureBatcher = generic_batch,
) -> Any:
    """Batch samples (dicts, dataclasses or named tuples) field by field into ``result_type``.

    This is Energon's ``TaskEncoder._batch``: ``actions`` picks a batcher per field name,
    ``default_action`` serves the others. ``result_type`` defaults to the samples' type.
    Metadata fields of samples (``__subflavors__``) are kept as one value per sample.

    Example:
        >>> batch_samples([{"a": 1}, {"a": 2}], dict, actions={"a": sum})
        {'a': 3}
    """
    if not samples:
        raise StokerError("cannot batch an empty list of samples.")
    result_type = result_type or type(samples[0])
    if dataclasses.is_dataclass(result_type) and hasattr(result_type, "from_samples"):
        return result_type.from_samples(samples)
    columns = _columns(samples)
    actions = {"__subflavors__": batch_list, **(actions or {})}
    batched = {key: actions.get(key, default_action)(value) for key, value in columns.items()}
    if issubclass(result_type, dict):
        return result_type(batched) if result_type is not dict else batched
    if dataclasses.is_dataclass(result_type) or issubclass(result_type, tuple):
        return result_type(**batched)
    raise StokerError(
        f"cannot batch into {result_type.__name__}.",
        hint="Use a dict, a dataclass or a NamedTuple as batch type.",
    )


def _columns(samples: Sequence[Any]) -> dict[str, list[Any]]:
    first = samples[0]
    if isinstance(first, dict):
        return {key: list(map(itemgetter(key), samples)) for key in first}
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        names = [f.name for f in dataclasses.fields(first)]
    elif isinstance(first, tuple) and hasattr(first, "_fields"):
        names = list(first._fields)
    else:
        raise StokerError(
            f"cannot batch samples of type {type(first).__name__} field by field.",
            hint="Batch dicts, dataclasses or NamedTuples, or override TaskEncoder.batch.",
        )
    return {name: list(map(attrgetter(name), samples)) for name in names}
