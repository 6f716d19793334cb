"""Blends by size (e.g. tokens): the next reference comes from the dataset furthest behind.

When a task encoder defines ``blend_sample_size``, a weighted blend's weights apply to the sum of
sample sizes per dataset, not to sample counts. Each stream keeps, per dataset, the total size of
the samples it has taken (integers: a size is rounded to the nearest integer). The next reference
comes from the dataset with the least ``total_d / q_d``, ``q_d`` its quantised share (the weights
at the stream's nominal batch, renormalised over its datasets with samples, as in
:mod:`stoker.plan.scheduled_blend`); ties go to the lower dataset id.

The choice is a pure function of the totals and the position, so a stream's saved state is its
counts and these totals: a few integers per dataset. Two datasets' ``total / q`` never differ by
more than one sample's size over its share, so the realised size shares follow the weights to
within one (largest) sample per dataset. With a schedule, the totals are balanced towards the
weights at the current batch: after a weight changes, the dataset that the change favours is
drawn until the totals match the new weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stoker.errors import ConfigError


def sized_choice(totals: Sequence[int], shares: Sequence[int]) -> int | None:
    """The dataset with the least ``totals[d] / shares[d]`` among those with ``shares[d] > 0``
    (ties: the lowest ``d``); None if no share is above 0. Exact (integer cross products).

    Example:
        >>> sized_choice([0, 0], [1, 1]), sized_choice([300, 120], [1, 1])
        (0, 1)
        >>> sized_choice([300, 120], [3, 1]), sized_choice([5, 0], [1, 0])
        (0, 0)
    """
    best: int | None = None
    bt, bq = 0, 1
    for d, (t, q) in enumerate(zip(totals, shares, strict=True)):
        if q > 0 and (best is None or t * bq < bt * q):
            best, bt, bq = d, t, q
    return best


def size_units(size: object) -> int:
    """A ``blend_sample_size`` result as the integer added to its dataset's total.

    Example:
        >>> size_units(12), size_units(2.6)
        (12, 3)
    """
    if isinstance(size, bool) or not isinstance(size, int | float) or not math.isfinite(size):
        raise ConfigError(
            f"blend_sample_size returned {size!r}; it must return a finite number >= 0 "
            "(e.g. the sample's token count)."
        )
    if size < 0:
        raise ConfigError(
            f"blend_sample_size returned {size!r}; sizes must be >= 0 (e.g. token counts)."
        )
    return round(size)
