"""Lists of arrays in a batch cross from a worker as one buffer, not one pickle per array.

A batch of token sequences (``.bin``/``.idx``, Parquet list columns) holds a list of 1-D numpy
arrays of one dtype, one per sample. Pickled as it is, each array is a reduce call, a header and
a copy on both sides. :func:`packed` gives the batch to pickle instead: a dict whose such lists
are :class:`ArrayList` values, each pickled as one array with its cut points and unpickled as a
plain list of views of that one array (equal values, same dtypes, each writeable). Its
``__sources__`` (one ``SourceInfo`` per sample) crosses likewise as columns
(:class:`~stoker.model.source_info.SourceColumns`). ``benchmarks/bench_binidx.py`` and
``bench_parquet.py`` (W = 2) measure it.

Example:
    >>> import pickle
    >>> import numpy as np
    >>> batch = {"tokens": [np.arange(3), np.arange(2)], "__key__": ["0", "1"]}
    >>> back = pickle.loads(pickle.dumps(packed(batch)))
    >>> type(back["tokens"]) is list, [t.tolist() for t in back["tokens"]], back["__key__"]
    (True, [[0, 1, 2], [0, 1]], ['0', '1'])
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

#: Lists shorter than this are pickled as they are (one buffer saves little).
_FEW = 4
#: Field name -> (whether a list value qualifies, the list subclass it is pickled as), set by
#: the layers that own such values (:func:`pack_field`).
_FIELDS: dict[str, tuple[Callable[[list[Any]], bool], type[list[Any]]]] = {}


def pack_field(name: str, accepts: Callable[[list[Any]], bool], packer: type[list[Any]]) -> None:
    """Have :func:`packed` pickle a batch's list field ``name`` as ``packer`` (a list subclass
    with its own ``__reduce__``) where ``accepts`` says the list qualifies (the model layer
    registers ``__sources__``: :class:`~stoker.model.source_info.SourceColumns`)."""
    _FIELDS[name] = (accepts, packer)


class ArrayList(list[Any]):
    """A list of 1-D arrays of one dtype that pickles as one array and its cut points."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        cuts = np.cumsum([len(a) for a in self], dtype=np.int64)
        return _unpack, (np.concatenate(self), cuts)


def _unpack(flat: npt.NDArray[Any], cuts: npt.NDArray[np.int64]) -> list[npt.NDArray[Any]]:
    ends = cuts.tolist()
    return [flat[a:b] for a, b in zip([0, *ends], ends, strict=False)]


def packed(batch: Any) -> Any:
    """``batch`` to pickle: a dict batch (or a plain subclass, such as a batch of crude
    samples) with each list of at least a few 1-D numpy arrays of one (non-object) dtype made
    an :class:`ArrayList` and its ``__sources__`` of one ``SourceInfo`` per sample a
    :class:`~stoker.model.source_info.SourceColumns` (in a shallow copy; the batch is
    unchanged); anything else as it is."""
    if not isinstance(batch, dict) or type(batch).__setitem__ is not dict.__setitem__:
        return batch
    out: dict[str, Any] | None = None
    for name, value in batch.items():
        if type(value) is not list or len(value) < _FEW:
            continue
        field = _FIELDS.get(name)
        if _same_vectors(value):
            packer: type[list[Any]] = ArrayList
        elif field is not None and field[0](value):
            packer = field[1]
        else:
            continue
        if out is None:
            out = copy.copy(batch)
        out[name] = packer(value)
    return batch if out is None else out


def _same_vectors(values: list[Any]) -> bool:
    """Whether ``values`` are plain 1-D numpy arrays of one non-object dtype."""
    first = values[0]
    if type(first) is not np.ndarray or first.ndim != 1 or first.dtype.hasobject:
        return False
    dtype = first.dtype
    return all(type(v) is np.ndarray and v.ndim == 1 and v.dtype == dtype for v in values)


__all__ = ["ArrayList", "packed"]
