"""Tensors over shared-memory storages: a fresh segment, and a view of one at an offset.

Example:
    >>> storage = new_shared(64)
    >>> tensor_on(storage, torch.int32, (2, 4), offset=8).shape
    torch.Size([2, 4])
"""

from __future__ import annotations

import math

import torch


def new_shared(nbytes: int) -> torch.UntypedStorage:
    """A new shared-memory segment (zero-filled: a fresh file), as torch's collate makes."""
    return torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call,no-any-return]


def tensor_on(
    storage: torch.UntypedStorage,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    offset: int = 0,
    stride: tuple[int, ...] | None = None,
) -> torch.Tensor:
    """A tensor over ``storage`` (``offset`` in elements; contiguous unless ``stride``)."""
    if stride is None:
        stride = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
