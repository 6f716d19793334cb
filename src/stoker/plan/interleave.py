"""Round-robin interleaving of ``parallel_shard_iters`` slices, with random access.

An epoch's slice sequence is taken in *chunks* of ``P`` consecutive slices. Inside a chunk the
slices are read round-robin, like ``P`` open shard iterators: element ``j`` of the chunk's slice
``i`` comes at rank ``(j, i)``; a slice that runs out drops out of the rotation. The chunk's
positions are therefore a closed-form function of its ``P`` lengths, so any position can be looked
up without materialising the epoch: :meth:`Chunks.lookup` does it vectorised over positions.

For a chunk with lengths ``l_i``, ``f(j) = sum_i min(l_i, j)`` elements precede round ``j``. Sorting
the lengths ``s_0 <= ... <= s_{P-1}`` makes ``f`` piecewise linear with slope ``P - k`` on
``[s_{k-1}, s_k)``, so a position ``q`` gives its round ``j`` and its rank ``r`` among the slices
still active in that round in O(P).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Int64Array = NDArray[np.int64]


@dataclass(frozen=True)
class Chunks:
    """One epoch's chunks: ``(n_chunks, P)`` slice starts and lengths (padding has length 0)."""

    starts: Int64Array
    lengths: Int64Array
    #: Position of each chunk's first element in the epoch, plus the epoch length at the end.
    offsets: Int64Array

    @classmethod
    def build(
        cls, order: Int64Array, slice_starts: Int64Array, slice_lengths: Int64Array, width: int
    ) -> Chunks:
        """Group the slices ``order`` into chunks of ``width`` (the last one padded)."""
        width = max(1, min(width, order.size))
        n_chunks = -(-order.size // width)
        starts = np.zeros(n_chunks * width, np.int64)
        lengths = np.zeros(n_chunks * width, np.int64)
        starts[: order.size] = slice_starts[order]
        lengths[: order.size] = slice_lengths[order]
        offsets = np.zeros(n_chunks + 1, np.int64)
        np.cumsum(lengths.reshape(n_chunks, width).sum(axis=1), out=offsets[1:])
        return cls(starts.reshape(n_chunks, width), lengths.reshape(n_chunks, width), offsets)

    @property
    def total(self) -> int:
        """Number of elements in the epoch."""
        return int(self.offsets[-1])

    def lookup(self, positions: Int64Array) -> Int64Array:
        """The sample (in slice coordinates, ``start + j``) at each epoch position."""
        if positions.size == 0:
            return np.zeros(0, np.int64)
        chunk = np.searchsorted(self.offsets, positions, side="right") - 1
        rows, row_of = np.unique(chunk, return_inverse=True)
        q = positions - self.offsets[chunk]
        lengths = self.lengths[rows]
        width = lengths.shape[1]
        by_length = np.argsort(lengths, axis=1, kind="stable")
        previous = np.zeros_like(lengths)  # s_{k-1} of the sorted lengths, with s_{-1} = 0
        previous[:, 1:] = np.take_along_axis(lengths, by_length[:, :-1], axis=1)
        before = np.cumsum(previous, axis=1) + (width - np.arange(width)) * previous  # f(s_{k-1})
        # Segment k of each position: one searchsorted over the rows laid end to end.
        span = int(before[:, -1].max()) + int(q.max()) + 1
        lifted = (before + np.arange(rows.size)[:, None] * span).ravel()
        k = np.searchsorted(lifted, q + row_of * span, side="right") - row_of * width - 1
        offset = q - before[row_of, k]
        active = width - k
        j = previous[row_of, k] + offset // active
        if rows.size * width <= positions.size:
            slot = _slots_by_table(by_length, row_of, k, offset % active)
        else:
            slot = _slots_by_scan(lengths[row_of], j, offset % active)
        found: Int64Array = self.starts[chunk, slot] + j
        return found


def _slots_by_table(
    by_length: Int64Array, row_of: Int64Array, k: Int64Array, rank: Int64Array
) -> Int64Array:
    """Slot of the ``rank``-th slice (chunk order) among those of sorted index >= ``k``.

    Builds a ``(rows, P, P)`` table: cheap when few chunks serve many positions.
    """
    width = by_length.shape[1]
    sorted_index = np.empty_like(by_length)
    np.put_along_axis(sorted_index, by_length, np.arange(width)[None, :], axis=1)
    eligible = sorted_index[:, None, :] >= np.arange(width)[None, :, None]
    table = np.argsort(~eligible, axis=2, kind="stable")
    slots: Int64Array = table[row_of, k, rank]
    return slots


def _slots_by_scan(lengths: Int64Array, j: Int64Array, rank: Int64Array) -> Int64Array:
    """Slot of the ``rank``-th slice (chunk order) still active in round ``j``, per position."""
    seen = np.cumsum(lengths > j[:, None], axis=1)
    slots: Int64Array = np.argmax(seen > rank[:, None], axis=1)
    return slots
