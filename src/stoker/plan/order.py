"""The order of a stream's slices in each epoch (``shuffle_over_epochs_multiplier`` m).

* ``m == 1``: each epoch is a fresh permutation of the slices, keyed by the epoch.
* ``m > 1``: epochs are grouped by ``m``; group ``g`` draws one permutation of ``m`` copies of
  the slice list (keyed by ``g``) and cuts it into ``m`` consecutive epochs of ``n`` slices. Over
  a group every sample is seen exactly ``m`` times, but an epoch may repeat or miss slices.
* ``m == -1``: each epoch draws ``n`` slices uniformly with replacement, keyed by the epoch.
* ``m == 0``: the slices in order, every epoch (Energon's ``shuffle_over_epochs_multiplier=None``;
  the interleave and the shuffle buffer still apply).

All draws use ``keyed_rng(seed, SLICE_ORDER, dataset_id, stream, epoch_or_group)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from stoker.errors import ConfigError
from stoker.plan.rng import SLICE_ORDER, keyed_rng


def check_multiplier(multiplier: int) -> None:
    """Raise ValueError unless ``multiplier`` is -1, 0 or >= 1."""
    if multiplier < -1:
        raise ConfigError(
            f"{multiplier=} is invalid: use 1 (one permutation per epoch), m > 1 (shuffle over "
            "m epochs), -1 (draw slices with replacement) or 0 / None (slices in order)."
        )


def combine_multipliers(outer: int | None, inner: int | None) -> int:
    """Energon's rule for nested ``shuffle_over_epochs_multiplier`` values: ``None`` (stoker's
    0, slices in order) wins, then -1 (with replacement), else they multiply.

    Example:
        >>> combine_multipliers(2, 3), combine_multipliers(-1, 3), combine_multipliers(None, -1)
        (6, -1, 0)
    """
    a, b = (0 if m is None else m for m in (outer, inner))
    if a == 0 or b == 0:
        return 0
    if a == -1 or b == -1:
        return -1
    return a * b


def epoch_slice_order(
    num_slices: int, *, seed: int, dataset_id: int, stream: int, epoch: int, multiplier: int
) -> NDArray[np.int64]:
    """Indices of the stream's slices, in the order ``epoch`` visits them.

    Example:
        >>> order = epoch_slice_order(4, seed=0, dataset_id=0, stream=0, epoch=0, multiplier=1)
        >>> sorted(order.tolist())
        [0, 1, 2, 3]
    """
    check_multiplier(multiplier)
    if epoch < 0:
        raise ConfigError(f"{epoch=} must be >= 0.")
    if num_slices <= 1:  # every draw gives these; skip the generator (few samples per stream)
        return np.zeros(num_slices, np.int64)
    if multiplier == 0:
        return np.arange(num_slices, dtype=np.int64)
    if multiplier == -1:
        rng = keyed_rng(seed, SLICE_ORDER, dataset_id, stream, epoch)
        return rng.integers(0, num_slices, size=num_slices, dtype=np.int64)
    group, index = divmod(epoch, multiplier)
    rng = keyed_rng(seed, SLICE_ORDER, dataset_id, stream, group)
    if multiplier == 1:
        return rng.permutation(num_slices).astype(np.int64, copy=False)
    sequence = rng.permutation(multiplier * num_slices)[
        index * num_slices : (index + 1) * num_slices
    ]
    return (sequence % num_slices).astype(np.int64, copy=False)
