"""Concatenating whole batches into one: ``batch_mix_fn`` helpers of ``MixBatchDataset``.

Batches are joined along their first (batch) dimension: tensors are zero-padded to the largest
size in the other dimensions and concatenated; lists and tuples (keys, captions, a ``Batch``'s
``__key__`` and ``__restore_key__``) are concatenated; dicts, dataclasses (``Batch`` subclasses)
and named tuples are joined field by field; other values become a list with one per batch.
(Energon lists lists per batch instead of concatenating them.)

Example:
    >>> import torch
    >>> concat_pad([torch.ones(1, 2), torch.ones(2, 1)]).tolist()
    [[1.0, 1.0], [1.0, 0.0], [1.0, 0.0]]
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from stoker.errors import StokerError


def concat_pad(batches: list[Any]) -> Any:
    """Concatenate tensors along dim 0, zero-padding the other dims to the largest size.

    Example:
        >>> concat_pad([torch.zeros(2, 3), torch.ones(1, 4)]).shape
        torch.Size([3, 4])
    """
    ndim = batches[0].ndim
    if ndim == 0 or any(b.ndim != ndim for b in batches):
        shapes = [tuple(b.shape) for b in batches]
        raise StokerError(
            f"cannot concatenate batch tensors of shapes {shapes}.",
            hint="Every sub-batch must hold this field as a tensor with a batch dimension and "
            "the same number of dimensions; else pass your own batch_mix_fn.",
        )
    total = sum(int(b.shape[0]) for b in batches)
    size = [max(int(b.shape[dim]) for b in batches) for dim in range(1, ndim)]
    out = batches[0].new_zeros((total, *size))
    row = 0
    for b in batches:
        region = (slice(row, row + b.shape[0]), *(slice(0, s) for s in b.shape[1:]))
        out[region] = b
        row += int(b.shape[0])
    return out


def generic_concat(batches: list[Any]) -> Any:
    """Join batches by type (see the module docstring), recursing into fields.

    Example:
        >>> a, b = {"x": torch.ones(1), "k": ["a"]}, {"x": torch.ones(2), "k": ["b", "c"]}
        >>> generic_concat([a, b])
        {'x': tensor([1., 1., 1.]), 'k': ['a', 'b', 'c']}
    """
    first = batches[0]
    if isinstance(first, torch.Tensor):
        return concat_pad(batches)
    if isinstance(first, dict):
        return {key: generic_concat([b[key] for b in batches]) for key in first}
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        fields = [f.name for f in dataclasses.fields(first) if f.init]
        return type(first)(**{n: generic_concat([getattr(b, n) for b in batches]) for n in fields})
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(
            *(generic_concat([getattr(b, n) for b in batches]) for n in first._fields)
        )
    if isinstance(first, list):
        return [value for b in batches for value in b]
    if isinstance(first, tuple):
        return tuple(value for b in batches for value in b)
    if all(b is None for b in batches):
        return None
    return list(batches)


def homogeneous_concat_mix(batches: list[Any]) -> Any:
    """A ``batch_mix_fn`` joining sub-batches of one type into one batch (:func:`generic_concat`).

    Example:
        >>> homogeneous_concat_mix([{"x": torch.zeros(2, 3)}, {"x": torch.ones(4, 3)}])["x"].shape
        torch.Size([6, 3])
    """
    kinds = {type(b) for b in batches}
    if len(kinds) > 1:
        names = ", ".join(sorted(k.__qualname__ for k in kinds))
        raise StokerError(
            f"homogeneous_concat_mix got sub-batches of several types: {names}.",
            hint="Make every sub-dataset's task encoder return the same batch type, or pass a "
            "batch_mix_fn that handles each type (the default keeps the list of sub-batches).",
        )
    return generic_concat(batches)
