"""The choice rule of blends by size: exact, deterministic, and the totals stay within one
sample of the weights."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.plan.sized_blend import size_units, sized_choice


@pytest.mark.parametrize("shares", [(1, 1), (3, 1), (1, 2, 5)])
def test_totals_stay_within_one_sample_of_the_weights(shares: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    means = [100, 1000, 37][: len(shares)]
    totals = [0] * len(shares)
    for _ in range(5000):
        d = sized_choice(totals, shares)
        assert d is not None
        totals[d] += int(rng.integers(1, 2 * means[d]))
        # each total over its share is within the largest sample over its share of the others
        times = [t / q for t, q in zip(totals, shares, strict=True)]
        assert max(times) - min(times) <= max(2 * m / q for m, q in zip(means, shares, strict=True))


def test_zero_shares_are_never_chosen_and_ties_go_first() -> None:
    assert sized_choice([0, 0, 0], [0, 1, 1]) == 1
    assert sized_choice([10, 0], [1, 0]) == 0
    assert sized_choice([1, 1], [0, 0]) is None


@pytest.mark.parametrize("bad", [-1, float("nan"), "3", True])
def test_a_bad_size_names_the_hook(bad: object) -> None:
    with pytest.raises(ConfigError, match="blend_sample_size"):
        size_units(bad)
