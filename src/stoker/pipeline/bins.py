"""Bin packing for ``select_samples_to_pack``: first-fit-decreasing in O(n log n).

Example:
    >>> first_fit_decreasing([5, 3, 4, 2], 7)
    [[0, 3], [2, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def first_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Bins of indices into ``lengths``: longest first, each into the first bin it fits.

    Items longer than ``capacity`` are in no bin (a packing task encoder leaves them in the
    buffer, and stoker reports them at the end). A max segment tree over the bins' free space
    finds the first bin that fits in O(log n): 10 000 items take milliseconds.
    """
    n = len(lengths)
    if n == 0:
        return []
    size = 1 << max(1, (n - 1).bit_length())
    tree = [capacity] * (2 * size)  # unused bins have the whole capacity free
    bins: list[list[int]] = [[] for _ in range(n)]
    for i in np.argsort(-np.asarray(lengths), kind="stable").tolist():
        length = lengths[i]
        if length > capacity:
            continue
        node = 1
        while node < size:
            node = 2 * node if tree[2 * node] >= length else 2 * node + 1
        bins[node - size].append(i)
        tree[node] -= length
        node //= 2
        while node:
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
            node //= 2
    return [b for b in bins if b]
