"""The blend schedule: which dataset each sample of a stream comes from, as integers.

**Weighted** (:func:`weighted_choices`): dataset ``d`` has weight ``p_d`` (normalised). The ``k``-th
sample stream ``v`` takes from ``d`` is *due* at ``T(d, k) = (k + u(d, k)) / p_d``; the jitter
``u(d, k)`` in [0, 1) is draw ``k % BLOCK`` of ``keyed_rng(seed, BLEND, v, d, k // BLOCK).random``.
The stream's sequence is every ``(d, k)`` ordered by ``T`` (ties: lower ``d`` first). ``T`` grows
with ``k``, so after any prefix the state is the per-dataset counts ``c``: the next ``n`` choices
merge the due times of ``k in [c_d, c_d + ceil(n p_d) + 2)``, widened until provably enough.

Balance: for a prefix ending at due time ``t``, ``e_d = c_d - t p_d`` lies in [-1, 1], so a prefix
of length ``L`` has ``|c_d - L p_d| <= 1 + p_d (D - 2)``: at most 1 for two datasets, at most 2
when ``p_d <= 1 / (D - 2)`` (equal weights, three datasets). A heavy dataset among many light
ones can drift further (typically ``p_d sqrt(D) / 2``: the light ones' jitters add up).

**Epochized** (:func:`epochized_allotments`, :func:`epochized_choices`): dataset ``d`` with
repetitions ``r_d`` gives stream ``v`` the allotment ``A = floor(r_d) N + F`` (``N`` = samples of
``d`` in ``v``). The fraction ``f = frac(r_d)`` is split over streams by cumulative size ``C(v)``:
``F(v) = floor(f C(v+1)) - floor(f C(v))``, so ``F(v) <= ceil(f N) <= N`` (never clipped) and the
streams' total is exactly ``floor(r_d S_d)``. The stream then blends with weights ``A`` and stops
dataset ``d`` after ``A_d`` samples (all are due by ``sum(A)``, so they run out together; a used-up
one drops out). Its ``k``-th sample of ``d`` is plan position ``k`` of ``d`` (epoch ``k // N``,
offset ``k % N``).

Cost: one ``keyed_rng`` (~65 us) per dataset and block of 4096 samples, cached; then about
5 us per dataset plus a sort of ``n + 3D`` due times: ``n=1024, D=50`` takes ~0.6 ms (~4 ms cold).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError
from stoker.plan.rng import BLEND, keyed_rng
from stoker.plan.slices import Int64Array

#: Jitter draws per keyed generator: ``u(d, k)`` comes from block ``k // BLOCK``.
BLOCK: Final = 4096

Counts = Sequence[int] | npt.NDArray[np.integer]
Float64Array = npt.NDArray[np.float64]


def weighted_choices(
    counts: Counts, weights: npt.ArrayLike, n: int, *, seed: int, stream: int
) -> Int64Array:
    """Dataset ids of the next ``n`` samples, after ``counts[d]`` samples taken from each ``d``.

    Example:
        >>> first = weighted_choices([0, 0], [5, 2], 7, seed=0, stream=0)
        >>> np.bincount(first).tolist()
        [5, 2]
        >>> tail = weighted_choices(advance([0, 0], first[:3]), [5, 2], 4, seed=0, stream=0)
        >>> bool((tail == first[3:]).all())
        True
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or w.min() < 0 or w.sum() <= 0:
        raise ConfigError(f"weights must be finite, >= 0, not all 0, got {weights=}.")
    c = _check(counts, w.size, n, seed, stream)
    return _merge(c, w / w.sum(), np.full(w.size, np.inf), n, seed, stream)


def epochized_choices(
    counts: Counts, allotments: npt.ArrayLike, n: int, *, seed: int, stream: int
) -> Int64Array:
    """Like :func:`weighted_choices` with weights ``allotments``, stopping ``d`` after ``A_d``.

    Returns fewer than ``n`` ids once every allotment is used up.

    Example:
        >>> ids = epochized_choices([0, 0], [4, 1], 9, seed=0, stream=0)
        >>> np.bincount(ids).tolist()
        [4, 1]
    """
    a = np.asarray(allotments)
    if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer) or a.min() < 0:
        raise ConfigError(f"allotments must be a 1-D array of integers >= 0, got {allotments=}.")
    c = _check(counts, a.size, n, seed, stream)
    total = int(a.sum())
    n = min(n, max(total - int(np.minimum(c, a).sum()), 0))
    if n == 0:
        return np.zeros(0, np.int64)
    return _merge(c, a / total, a.astype(np.float64), n, seed, stream)


def advance(counts: Counts, choices: npt.ArrayLike) -> Int64Array:
    """The counts after taking ``choices``: ``counts + bincount(choices)``."""
    c = np.asarray(counts, dtype=np.int64)
    ids = np.asarray(choices, dtype=np.int64)
    return c + np.bincount(ids, minlength=c.size).astype(np.int64)


def epochized_allotments(stream_sizes: npt.ArrayLike, repetitions: npt.ArrayLike) -> Int64Array:
    """``A[d, v]``: samples stream ``v`` takes from dataset ``d`` (``stream_sizes`` is ``(D, V)``).

    Repetitions are read as the decimals they print as, so ``2.3`` of 10 samples is exactly 23.

    Example:
        >>> epochized_allotments([[3, 3, 4], [2, 3, 3]], [2, 0.5]).tolist()
        [[6, 6, 8], [1, 1, 2]]
    """
    sizes = np.asarray(stream_sizes)
    reps = np.asarray(repetitions, dtype=np.float64)
    if sizes.ndim != 2 or not np.issubdtype(sizes.dtype, np.integer) or (sizes < 0).any():
        raise ConfigError(f"stream_sizes must be a (D, V) array of integers >= 0, got {sizes=}.")
    if reps.shape != sizes.shape[:1] or not np.all(np.isfinite(reps)) or (reps < 0).any():
        raise ConfigError(f"need one finite repetition >= 0 per dataset, got {repetitions=}.")
    out = np.empty(sizes.shape, np.int64)
    for d, (row, rep) in enumerate(zip(sizes.astype(np.int64), reps.tolist(), strict=True)):
        r = Fraction(str(rep))
        whole, frac = int(r), r - int(r)
        cum = np.concatenate([[0], np.cumsum(row)]).astype(object)
        parts = (cum * frac.numerator) // frac.denominator
        out[d] = whole * row + np.diff(parts).astype(np.int64)
    return out


def _check(counts: Counts, size: int, n: int, seed: int, stream: int) -> Int64Array:
    c = np.asarray(counts)
    if c.shape != (size,) or not (size == 0 or np.issubdtype(c.dtype, np.integer)) or c.min() < 0:
        raise ConfigError(f"counts must be {size} integers >= 0 (one per dataset), got {counts=}.")
    if n < 0 or seed < 0 or stream < 0:
        raise ConfigError(f"{n=}, {seed=} and {stream=} must be >= 0.")
    return c.astype(np.int64)


def _merge(
    c: Int64Array, p: Float64Array, limit: Float64Array, n: int, seed: int, stream: int
) -> Int64Array:
    """The ``n`` smallest ``(T(d, k), d)`` with ``c_d <= k < limit_d``; ``p_d = 0`` never comes."""
    if n == 0:
        return np.zeros(0, np.int64)
    active = np.flatnonzero((p > 0) & (c < limit))
    width = np.ceil(n * p).astype(np.int64) + 2
    bg = np.random.Philox(0)
    while True:
        hi = np.minimum(c + width, limit).astype(np.int64)
        times = [_due_times(bg, seed, stream, int(d), int(c[d]), int(hi[d]), p[d]) for d in active]
        ids = np.repeat(active, hi[active] - c[active])
        due = np.concatenate(times) if times else np.zeros(0)
        order = np.lexsort((ids, due))[:n]
        last = (due[order[-1]], ids[order[-1]]) if order.size == n else (np.inf, -1)
        taken = np.bincount(ids[order], minlength=c.size)
        # A dataset may hold an earlier sample beyond its window only if all of its window came.
        next_due = hi / np.where(p > 0, p, 1.0)
        later = (next_due > last[0]) | ((next_due == last[0]) & (np.arange(c.size) > last[1]))
        short = (taken == hi - c) & (hi < limit) & ~later
        if not short[active].any():
            return ids[order].astype(np.int64)
        width[short] *= 2


def _due_times(
    bg: np.random.Philox, seed: int, stream: int, d: int, lo: int, hi: int, p: float
) -> Float64Array:
    """``T(d, k)`` for ``k in [lo, hi)``."""
    return (np.arange(lo, hi, dtype=np.float64) + jitter(bg, seed, stream, d, lo, hi)) / p


def jitter(bg: np.random.Philox, seed: int, stream: int, d: int, lo: int, hi: int) -> Float64Array:
    """``u(d, k)`` for ``k in [lo, hi)``, read straight from the keyed Philox counters."""
    gen, parts = np.random.Generator(bg), []
    for block in range(lo // BLOCK, (hi - 1) // BLOCK + 1):
        a, b = max(lo, block * BLOCK) - block * BLOCK, min(hi, (block + 1) * BLOCK) - block * BLOCK
        # Philox makes four 64-bit words (four doubles) per counter step: start at a // 4.
        counter = np.array([a // 4, 0, 0, 0], np.uint64)
        bg.state = {
            "bit_generator": "Philox",
            "state": {"counter": counter, "key": _key(seed, stream, d, block)},
            "buffer": np.zeros(4, np.uint64),
            "buffer_pos": 4,
            "has_uint32": 0,
            "uinteger": 0,
        }
        parts.append(gen.random(b - a // 4 * 4)[a % 4 :])
    if not parts:
        return np.zeros(0)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


@functools.lru_cache(maxsize=4096)
def _key(seed: int, stream: int, d: int, block: int) -> npt.NDArray[np.uint64]:
    state = keyed_rng(seed, BLEND, stream, d, block).bit_generator.state
    key: npt.NDArray[np.uint64] = state["state"]["key"]
    key.flags.writeable = False
    return key
