"""``.pickle`` / ``.pyd`` parts: unpickled by a restricted unpickler that can build only data.

An ordinary unpickler imports and calls whatever a pickle names, so a pickle from a dataset could
run any command. :class:`DataUnpickler` resolves only the names that plain data needs:
``set``, ``frozenset``, ``bytearray``, ``complex``, ``OrderedDict``, the byte strings of old
protocols, and numpy arrays, dtypes and scalars (what numpy's own pickles of them name).
Containers, numbers and strings need no name at all. Anything else (a function, a class, a
torch tensor) is refused with a :class:`~stoker.errors.SampleError` naming the part; the data's
owner may allow full unpickling with ``LoaderOptions(trust_pickles=True)`` or
``STOKER_TRUST_PICKLES=1`` (docs/security.md).

Example:
    >>> import pickle
    >>> import numpy as np
    >>> load_data_pickle(pickle.dumps({"x": np.arange(3)}))["x"]
    array([0, 1, 2])
    >>> load_data_pickle(pickle.dumps(print))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stoker.errors.SampleError: the pickle names 'builtins.print', which is not plain data: ...
"""

from __future__ import annotations

import codecs
import importlib
import io
import pickle
from typing import Any

import numpy as np

from stoker.errors import SampleError
from stoker.storage.options import TRUST_PICKLES_ENV

#: Names a data pickle may use: (module, name). numpy's own pickles of arrays, dtypes and
#: scalars name these; ``numpy.core`` is numpy 1's spelling of numpy 2's ``numpy._core``.
_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "complex"),
        ("collections", "OrderedDict"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.numeric", "_frombuffer"),
    }
)


def _latin1_encode(text: str, encoding: str = "utf-8", errors: str = "strict") -> bytes:
    """``_codecs.encode`` as protocols 0-2 use it for byte strings (latin-1 only)."""
    if codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError(f"_codecs.encode with {encoding=} is not plain data")
    return text.encode("latin-1", errors)


class DataUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the names of :data:`_ALLOWED` (and numpy's scalar
    types): a pickle of plain data and numpy arrays loads, one naming anything else raises
    ``pickle.UnpicklingError`` before that name is imported."""

    def find_class(self, module: str, name: str) -> Any:
        module = "builtins" if module == "__builtin__" else module  # protocols 0-2
        wanted = (module.replace("numpy.core.", "numpy._core.", 1), name)
        if wanted == ("_codecs", "encode"):
            return _latin1_encode
        if wanted in _ALLOWED:
            if module.startswith("numpy"):
                return _numpy_attr(*wanted)
            return super().find_class(module, name)
        if module == "numpy":  # numpy's scalar types (numpy.float32, numpy.int64, ...)
            found = getattr(np, name, None)
            if isinstance(found, type) and issubclass(found, np.generic):
                return found
        raise pickle.UnpicklingError(f"the pickle names '{module}.{name}'")


def _numpy_attr(module: str, name: str) -> Any:
    """``module.name`` of numpy, under numpy 2's module names or numpy 1's."""
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError:  # numpy 1: numpy.core
        return getattr(importlib.import_module(module.replace("._core", ".core", 1)), name)


def load_data_pickle(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`DataUnpickler`.

    Raises:
        SampleError: the pickle names something that is not plain data (the message says how
            to unpickle fully), or it is not a valid pickle.
    """
    try:
        return DataUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        problem = str(e)
        if not problem.startswith("the pickle names"):
            raise
    raise SampleError(
        f"{problem}, which is not plain data: stoker unpickles only containers, numbers, "
        "strings, bytes and numpy arrays, dtypes and scalars, so that a dataset cannot run code.",
        hint="If you trust this dataset's pickles, unpickle them fully with "
        f"get_loader(..., options=LoaderOptions(trust_pickles=True)) or {TRUST_PICKLES_ENV}=1 "
        "(docs/security.md).",
    )


def decode_pickle(ext: str, data: bytes, trusted: bool) -> Any:
    """A ``pickle``/``pyd`` part: fully unpickled where ``trusted``, else as plain data."""
    if trusted:
        return pickle.loads(data)  # the user's explicit opt-in (trust_pickles)
    return load_data_pickle(data)
