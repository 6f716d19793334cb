"""A batch's samples held as columns, batched without a Python object per sample on the way.

A stream may hand the batcher (:class:`~stoker.pipeline.batching.BatchMaker`) a
:class:`ColumnSamples` in place of a list of samples: runs of token sequences or Parquet rows
kept as the columns and references they were read as (:mod:`stoker.runtime.column_pieces`).
:meth:`ColumnSamples.columnar_batch` makes the batch the task encoder's default ``batch`` would
make of those samples, straight from the columns; where it cannot (mixed with samples of other
sources), iterating gives the samples themselves and the batcher batches them as usual.

Example:
    >>> class Numbers(ColumnSamples):
    ...     def __len__(self): return 3
    ...     def __iter__(self): return iter([{"x": 0}, {"x": 1}, {"x": 2}])
    ...     def columnar_batch(self): return {"x": [0, 1, 2]}, [None] * 3
    >>> samples_of(Numbers()), samples_of([1])
    ([{'x': 0}, {'x': 1}, {'x': 2}], [1])
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any


class ColumnSamples(ABC):
    """Samples of a batch held as columns (see the module docstring)."""

    @abstractmethod
    def __len__(self) -> int:
        """How many samples."""

    @abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """The samples themselves, as the stream would have listed them."""

    @abstractmethod
    def columnar_batch(self) -> tuple[Any, list[Any]] | None:
        """The batch the default ``batch`` makes of the samples (before its restore key is
        set) and the samples' restore keys; None where the columns do not make it."""


def samples_of(samples: Any) -> list[Any]:
    """``samples`` as a list (a :class:`ColumnSamples` made into its samples)."""
    return samples if type(samples) is list else list(samples)


__all__ = ["ColumnSamples", "samples_of"]
