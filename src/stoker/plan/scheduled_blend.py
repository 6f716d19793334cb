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
from stoker.plan.weights import BlendWeights

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

    Datasets that ``rates`` marks as without samples are never drawn.
    """
    c = np.asarray(counts, dtype=np.int64)
    if n <= 0:
        return np.zeros(0, np.int64)
    size, active = rates.batch_size, np.flatnonzero(rates.live)
    s0 = int(c.sum())
    bg = np.random.Philox(0)
    first_batch, reach = max(0, (s0 - n) // size - 1), n + 64
    while True:
        horizon = s0 + reach  # every reference due before it
        last_batch = horizon // size + 1
        sums = rates.sums_at(first_batch)
        q = rates.shares(first_batch, last_batch)
        cum = np.concatenate([sums[:, None], sums[:, None] + np.cumsum(q * size, axis=1)], axis=1)
        at_h = (
            cum[:, horizon // size - first_batch]
            + (horizon % size) * q[:, horizon // size - first_batch]
        )
        times, ids, early = [], [], False
        for d in active.tolist():
            hi = max(int(c[d]), -(-int(at_h[d]) // Q))  # k < Λ_d(horizon) / Q
            x = (np.arange(c[d], hi, dtype=np.float64) + jitter(bg, seed, rates.stream, d,
                 int(c[d]), hi)) * Q  # fmt: skip
            if x.size and x[0] < cum[d, 0]:
                early = True  # the window starts after the first one: start earlier
                break
            x = x[x < at_h[d]]  # due before the horizon
            idx = np.searchsorted(cum[d], x, side="right") - 1  # q[d, idx] > 0 there
            times.append((first_batch + idx) * size + (x - cum[d, idx]) / q[d, idx])
            ids.append(np.full(x.size, d, np.int64))
        if early:
            first_batch = first_batch // 2
            continue
        due_all = np.concatenate(times) if times else np.zeros(0)
        id_all = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        if due_all.size >= n:
            chosen: Int64Array = id_all[np.lexsort((id_all, due_all))[:n]]
            return chosen
        reach *= 2
