"""The pickler a worker sends batches with: it notes whether a batch shares resources.

A batch pickled with :class:`multiprocessing.reduction.ForkingPickler` may carry resources that
only live while its worker does: torch shares a tensor's storage as a file descriptor (or a file
name) that the worker serves, ``multiprocessing`` does the same for sockets and connections.
Such a batch must be unpickled at once, while the worker still serves it. A batch of plain data
(text, numbers, small-sample columns) carries none: the main process may keep its bytes and
unpickle it only when its turn comes, so its Python objects are made just before the training
loop takes them (as with ``num_workers=0``), not while it waits in a queue. Objects made long
before they are used outlive the collector's young generations and make its full collections
(of the whole training process) frequent.

:class:`BatchPickler` pickles like ``ForkingPickler`` and sets :attr:`BatchPickler.shares` when
any reducer registered with ``ForkingPickler`` (or its ``copyreg`` table) ran that may share a
resource. Only those reducers can: ``copyreg``'s table serves every pickle, so its entries
(numpy's for the ``np.dtype`` class that every array's pickle names, ``re``'s, ``complex``'s)
give plain data, and a batch of numpy arrays travels as plain data.

Example:
    >>> import io, torch
    >>> pickler = BatchPickler(io.BytesIO())
    >>> pickler.dump({"text": ["a", "b"]}); pickler.shares
    False
    >>> pickler = BatchPickler(io.BytesIO())
    >>> pickler.dump({"ids": torch.zeros(3)}); pickler.shares
    True
    >>> import numpy as np
    >>> pickler = BatchPickler(io.BytesIO())
    >>> pickler.dump({"tokens": [np.arange(3)]}); pickler.shares
    False
"""

from __future__ import annotations

import copyreg
import io
import pickle
from collections.abc import Callable
from multiprocessing import reduction
from multiprocessing.reduction import ForkingPickler
from typing import Any

from stoker.pipeline.array_lists import packed

#: Reducers of ``multiprocessing.reduction`` that share nothing (methods, partials).
_PLAIN: frozenset[Callable[..., Any]] = frozenset(
    getattr(reduction, name)
    for name in ("_reduce_method", "_reduce_method_descriptor", "_reduce_partial")
    if hasattr(reduction, name)
)

_table: dict[Any, Any] = {}
_table_key: tuple[int, int] = (-1, -1)
#: Set by the wrapped reducers during one :meth:`BatchPickler.dump` (one pickler at a time in
#: a worker: batches are pickled on the worker's own thread).
_shared = [False]


def _noting(reducer: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def reduce(obj: Any) -> Any:
        _shared[0] = True
        return reducer(obj)

    return reduce


def _dispatch_table() -> dict[Any, Any]:
    """``ForkingPickler``'s dispatch table with every reducer it adds to ``copyreg``'s that may
    share a resource wrapped to note it (rebuilt when a reducer is registered)."""
    global _table, _table_key
    extra: dict[Any, Any] = getattr(ForkingPickler, "_extra_reducers")  # noqa: B009 (filled by ForkingPickler.register; not in the stubs)
    key = (len(copyreg.dispatch_table), len(extra))
    if key != _table_key:
        table = dict(copyreg.dispatch_table)
        table.update({k: v if v in _PLAIN else _noting(v) for k, v in extra.items()})
        _table, _table_key = table, key
    return _table


class BatchPickler(pickle.Pickler):
    """Pickles like ``ForkingPickler`` (highest protocol); :attr:`shares` after :meth:`dump`."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = _dispatch_table()
        #: Whether the last :meth:`dump` ran a reducer that may share a resource.
        self.shares = False

    def dump(self, obj: Any) -> None:
        _shared[0] = False
        try:
            super().dump(packed(obj))  # lists of arrays as one buffer each
        finally:
            self.shares, _shared[0] = _shared[0], False


__all__ = ["BatchPickler"]
