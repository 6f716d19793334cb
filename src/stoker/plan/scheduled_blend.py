"""The blend schedule when weights change with the batch index: due times under a varying rate.

Stream ``v`` (of ``V``) draws its ``s``-th reference for its nominal batch ``s // B`` (``B`` the
batch size), which is global batch ``j = (s // B) * V + v``. Dataset ``d``'s share ``p_d(j)`` is its
:class:`~stoker.plan.weights.BlendWeights` weight there, renormalised over the datasets with
samples in the stream, and quantised to ``q_d = rint(p_d * Q)`` (``Q = 2**20``), so the running
sum ``Λ_d(s)`` (``q_d`` per reference) is exact integer arithmetic whatever the block sizes.

The ``k``-th sample of ``d`` is due at ``T(d, k) = Λ_d⁻¹((k + u(d, k)) Q)`` with the same jitter
``u`` as :func:`stoker.plan.weighted_choices`; with constant weights this is its ``(k + u) / p_d``.
The stream takes every ``(d, k)`` ordered by ``T`` (ties: lower ``d`` first), so its state stays
the per-dataset counts: each dataset is read in its own order, the schedule decides only when, and
a dataset whose share is 0 is not drawn. A prefix that ends at ``T`` holds ``Λ_d(T) / Q ± 1``
samples of ``d``: the realised share follows the schedule within one sample per dataset.

Cost: the ``q`` of the batches up to the stream's position, summed once per call from the nearest
remembered batch (restoring at batch 10^6 sums 10^6 / V columns: milliseconds), then the due
times of the next ``n`` references and a sort.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError
from stoker.plan.blend import jitter
from stoker.plan.slices import Int64Array
from stoker.plan.weights import BlendWeights, Float64Array

#: Resolution of a share: ``q = rint(p * Q)``.
Q = 1 << 20
#: Batches of ``q`` made at a time when summing towards a far position.
_CHUNK = 1 << 16


class StreamRates:
    """The quantised shares ``q[d, b]`` of one stream's nominal batches, and their sums.

    Example:
        >>> from stoker.plan.weights import WeightSchedule
        >>> sched = WeightSchedule.from_points("step", {0: 1, 4: 0})
        >>> tree = BlendWeights(((((sched, 1.0), 0),), (((sched, 1.0), 1),)))
        >>> rates = StreamRates(tree, [True, True], batch_size=1, virtual_workers=2, stream=0)
        >>> rates.shares(0, 3).tolist()  # batches 0, 1, 2 of stream 0: global 0, 2, 4
        [[524288, 524288, 0], [524288, 524288, 1048576]]
    """

    def __init__(
        self,
        weights: BlendWeights,
        live: Sequence[bool],
        *,
        batch_size: int,
        virtual_workers: int,
        stream: int,
    ) -> None:
        self.weights, self.live = weights, np.asarray(live, dtype=bool)
        self.batch_size, self.virtual_workers, self.stream = batch_size, virtual_workers, stream
        #: ``Λ`` at some batch starts (always batch 0), to sum on from.
        self._sums: dict[int, Int64Array] = {0: np.zeros(len(self.live), np.int64)}
        #: This stream's first batch at or after each knot and ramp end of the schedules.
        self._ramps = [(self._batch_of(a), self._batch_of(z)) for a, z in weights.ramps()]
        self._cuts = sorted({self._batch_of(x) for x in weights.knots()})
        #: Per dataset, added to the targets ``(k + u) Q``: 0, or where the mix last changed
        #: (:meth:`start_at`).
        self.offset = np.zeros(len(self.live), np.int64)

    def start_at(self, counts: Sequence[int] | npt.NDArray[np.integer]) -> None:
        """Draw as if the blend started at ``counts`` (a changed mix): sample ``counts[d]`` of
        ``d`` is due right after that position, not when the new weights would have had it due
        since batch 0 (which would draw a dataset's backlog in a burst)."""
        c = np.asarray(counts, dtype=np.int64)
        s = int(c.sum())
        b = s // self.batch_size
        at = self.sums_at(b) + self.shares(b, b + 1)[:, 0] * (s - b * self.batch_size)
        self.offset = at - c * Q

    def _batch_of(self, j: int) -> int:
        """This stream's first batch whose global index is ``>= j``."""
        return max(0, -(-(j - self.stream) // self.virtual_workers))

    def _flat(self, lo: int, hi: int) -> bool:
        """Whether every weight is the same on the batches ``[lo, hi)`` (no knot inside)."""
        return not any(a < hi and lo < z for a, z in self._ramps)

    def shares(self, lo: int, hi: int) -> Int64Array:
        """``q[d, b]`` for this stream's batches ``b in [lo, hi)``."""
        j = np.arange(lo, hi, dtype=np.int64) * self.virtual_workers + self.stream
        w = self.weights.at(j) * self.live[:, None]
        total = w.sum(axis=0)
        if (total <= 0).any():
            first = int(j[np.flatnonzero(total <= 0)[0]])
            raise ConfigError(
                f"every blend weight is 0 at global batch {first} (for the datasets with samples "
                f"in stream {self.stream}), so there is nothing to draw from.",
                hint="Keep at least one dataset's weight above 0 at every batch index.",
            )
        shares: Int64Array = np.rint(w / total * Q).astype(np.int64)
        return shares

    def sums_at(self, b: int) -> Int64Array:
        """``Λ_d`` at the start of batch ``b`` (``B`` times the shares of the batches before).

        Where every weight is constant (between knots, outside linear ramps) one batch's shares
        times the batch count stand for the sum: exact, so the same as summing them all.
        """
        base = max(k for k in self._sums if k <= b)
        acc = self._sums[base].copy()
        cuts = sorted({base, b, *(x for x in self._cuts if base < x < b)})
        for lo, hi in itertools.pairwise(cuts):
            if self._flat(lo, hi):
                acc += self.shares(lo, lo + 1)[:, 0] * (hi - lo) * self.batch_size
                continue
            for at in range(lo, hi, _CHUNK):
                acc += self.shares(at, min(at + _CHUNK, hi)).sum(axis=1) * self.batch_size
        if len(self._sums) > 8:  # remember a few recent starts only
            for k in sorted(self._sums)[1:-4]:
                del self._sums[k]
        self._sums[b] = acc
        out: Int64Array = acc.copy()
        return out


def scheduled_choices(
    counts: Sequence[int] | npt.NDArray[np.integer], n: int, rates: StreamRates, *, seed: int
) -> Int64Array:
    """Dataset ids of the stream's next ``n`` references after ``counts[d]`` from each ``d``.

    The reference at stream position ``s`` is the earliest due ``(T, d)`` among the datasets
    whose share in the nominal batch of ``s`` is above 0; datasets that ``rates`` marks as
    without samples are never drawn.
    """
    c = np.asarray(counts, dtype=np.int64).copy()
    size, bg, out, left = rates.batch_size, np.random.Philox(0), [], n
    while left > 0:
        s = int(c.sum())
        b, reach = s // size, -(-left // size) + 2
        while True:  # a run of batches where the same datasets have shares above 0
            q = rates.shares(b, b + reach)
            on = q[:, 0] > 0
            change = np.flatnonzero(((q > 0) != on[:, None]).any(axis=0))
            end = b + int(change[0]) if change.size else b + reach
            m = min(left, end * size - s)
            picked = _merge(c, m, on, rates, seed, bg, end, bool(change.size))
            if picked is not None:
                break
            reach *= 2  # not enough due before the window's end: look further
        out.append(picked)
        c += np.bincount(picked, minlength=c.size)
        left -= m
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _merge(
    c: Int64Array,
    m: int,
    on: npt.NDArray[np.bool_],
    rates: StreamRates,
    seed: int,
    bg: np.random.Philox,
    end: int,
    run_end: bool,
) -> Int64Array | None:
    """The ``m`` earliest due ``(T, d)`` with ``k >= c[d]`` among the datasets ``on``, exact up to
    batch ``end``; beyond it (the end of the run: nothing changes until there) at the last share.
    None if that is not enough and ``end`` is not where the run ends."""
    size, active = rates.batch_size, np.flatnonzero(on)
    first = max(0, int(c.sum()) // size - 2)
    width = np.full(c.size, m + 2, np.int64)
    while True:
        q = rates.shares(first, end)
        cum = np.concatenate([np.zeros((c.size, 1), np.int64), np.cumsum(q * size, axis=1)], 1)
        cum += rates.sums_at(first)[:, None]
        times, ids, early = [], [], False
        for d in active.tolist():
            lo, hi = int(c[d]), int(c[d] + width[d])
            x = (
                np.arange(lo, hi, dtype=np.float64) + jitter(bg, seed, rates.stream, d, lo, hi)
            ) * Q + float(rates.offset[d])
            if x[0] < cum[d, 0]:
                early = True  # due before the window starts: start it earlier
                break
            times.append(_due(x, cum[d], q[d], first, size, run_end))
            ids.append(np.full(x.size, d, np.int64))
        if early:
            first //= 2
            continue
        due, idx = np.concatenate(times), np.concatenate(ids)
        order = np.lexsort((idx, due))[:m]
        if not np.isfinite(due[order[-1]]):
            return None
        return idx[order]


def _due(
    x: Float64Array, cum: Int64Array, q: Int64Array, first: int, size: int, run_end: bool
) -> Float64Array:
    """``T`` of the jittered targets ``x`` of one dataset from its sums ``cum`` over the batches
    from ``first``; past the last batch at its share (``run_end``) or never (inf)."""
    idx = np.minimum(np.searchsorted(cum, x, side="right") - 1, q.size - 1)
    inside = x < cum[-1]
    rate = np.where(inside, q[idx], q[-1] if run_end else 0)
    start = np.where(inside, cum[idx], cum[-1])
    base = np.where(inside, first + idx, first + q.size) * size
    with np.errstate(divide="ignore"):
        t = base + (x - start) / rate
    return np.where(rate > 0, t, np.inf)
