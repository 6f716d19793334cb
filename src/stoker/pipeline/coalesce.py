"""Byte ranges of local shards read ahead together: close ranges merged into one read.

Example:
    >>> coalesce_lists([0, 10, 1 << 20], [10, 20, (1 << 20) + 5])
    [(0, 20), (1048576, 1048581)]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Ranges closer than this are read (or advised) as one.
COALESCE_GAP = 1 << 16


def sorted_unique(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``np.unique(values)`` of a 1-D integer array (each value once, ascending), by a sort:
    numpy's hash-based ``unique`` cost ~7x more on a block's few thousand sample indices.

    Example:
        >>> sorted_unique(np.array([5, 1, 5, 3, 1])).tolist()
        [1, 3, 5]
    """
    out = np.sort(values)
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def coalesce(starts: npt.NDArray[np.uint64], ends: npt.NDArray[np.uint64]) -> list[tuple[int, int]]:
    """Merge sorted byte ranges that are closer than ``COALESCE_GAP``.

    Example:
        >>> starts = np.array([0, 10, 1 << 20], np.uint64)
        >>> coalesce(starts, starts + np.array([10, 10, 5], np.uint64))
        [(0, 20), (1048576, 1048581)]
    """
    if len(starts) < 64:  # few: a plain loop costs less than numpy's calls
        return coalesce_lists(starts.tolist(), ends.tolist())
    first = starts.astype(np.int64)
    last = np.maximum.accumulate(ends.astype(np.int64))  # the end of everything so far
    # A range starts where the gap after everything before it is wider than COALESCE_GAP.
    cut = np.flatnonzero(first[1:] - last[:-1] > COALESCE_GAP) + 1
    begins = np.concatenate(([0], cut))
    finals = np.concatenate((cut - 1, [len(first) - 1]))
    return list(zip(first[begins].tolist(), last[finals].tolist(), strict=True))


def coalesce_lists(starts: list[int], ends: list[int]) -> list[tuple[int, int]]:
    """:func:`coalesce` of a few ranges given as lists, in a plain loop.

    Example:
        >>> coalesce_lists([0, 10, 1 << 20], [10, 20, (1 << 20) + 5])
        [(0, 20), (1048576, 1048581)]
    """
    ranges: list[tuple[int, int]] = []
    for start, end in zip(starts, ends, strict=True):
        if ranges and start - ranges[-1][1] <= COALESCE_GAP:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((start, end))
    return ranges
