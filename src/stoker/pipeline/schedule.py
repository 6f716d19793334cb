"""Which dataset, and which of its samples, a stream reads next: the blend in one place.

A stream draws from one or more datasets. Its position is ``counts``: how many references it has
taken from each dataset (positions in each dataset's own infinite stream plan). The schedule turns
counts into the next block of (dataset, reference) pairs:

- ``single`` / ``concat``: the datasets one after the other (validation, or one dataset);
- ``weighted``: interleaved by weight, forever (``blend``);
- ``epochized``: each dataset contributes its allotment per pass, interleaved (``blend_epochized``).

With ``repeat=False`` a pass ends when every dataset's bound for the pass is reached.

A ``sized`` weighted blend (the task encoder defines ``blend_sample_size``) balances the sum of
sizes instead (:mod:`stoker.plan.sized_blend`): its counts are followed by one size total per
dataset, and each block is one reference, since the next choice depends on the last sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError
from stoker.plan import StreamPlan, epochized_allotments, epochized_choices, weighted_choices
from stoker.plan.scheduled_blend import Q, StreamRates, scheduled_choices
from stoker.plan.sized_blend import sized_choice
from stoker.plan.weights import BlendWeights

BlendKind = Literal["single", "concat", "weighted", "epochized"]
Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BlendSpec:
    """How a dataset's sources are combined (see the module docstring)."""

    kind: BlendKind = "single"
    #: Per source: the weight (weighted) or the repetitions (epochized); unused otherwise.
    factors: tuple[float, ...] = field(default_factory=tuple)
    #: Weights that change with the batch index (weighted only; ``factors`` are then the weights
    #: at batch 0): :mod:`stoker.plan.scheduled_blend`.
    schedule: BlendWeights | None = None

    def __post_init__(self) -> None:
        if self.schedule is not None and self.kind != "weighted":
            raise ConfigError(
                f"a {self.kind} blend cannot have weight schedules: an epochized blend "
                "(repetitions) has no batch index to follow.",
                hint="Use blend with weight: {step: ...} or {linear: ...}, or constant "
                "repetitions in blend_epochized.",
            )


def epoch_start(plan: StreamPlan, epoch: int) -> int:
    """The position (in the plan's infinite view) where ``epoch`` starts."""
    return sum(plan.epoch_length(e) for e in range(epoch))


class StreamSchedule:
    """The blended reference sequence of one stream, computed from per-dataset counts."""

    def __init__(
        self,
        plans: Sequence[StreamPlan],
        spec: BlendSpec,
        *,
        seed: int,
        stream: int,
        repeat: bool,
        allotments: Sequence[int] = (),
        batch_size: int = 1,
        virtual_workers: int = 1,
        sized: bool = False,
        origin: Sequence[int] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> None:
        self.plans = list(plans)
        #: The counts where the mix last changed (a restore with ``allow_mix_change``): a
        #: weighted blend draws from there as if it started there (no catching up on the past).
        self.origin = None if origin is None else np.asarray(origin, dtype=np.int64)
        #: Blend by size totals (:mod:`stoker.plan.sized_blend`); weighted blends only.
        self.sized = sized and spec.kind == "weighted"
        self.batch_size = batch_size
        self.spec = spec
        self.seed, self.stream, self.repeat = seed, stream, repeat
        #: Per dataset, its samples in this stream (``lengths``: given without plans, to replay
        #: a blend's choices only, see :mod:`stoker.runtime.mix_change`).
        self.lengths = [p.num_samples for p in self.plans] if lengths is None else list(lengths)
        self.allotments = np.asarray(allotments, dtype=np.int64)
        self.rates: StreamRates | None = None
        if spec.schedule is not None:
            self.rates = StreamRates(
                spec.schedule,
                [n > 0 for n in self.lengths],
                batch_size=batch_size,
                virtual_workers=virtual_workers,
                stream=stream,
            )
            if self.origin is not None:
                self.rates.start_at(self.origin)
        if spec.kind == "weighted" and not repeat:
            raise ConfigError(
                "a weighted blend needs repeat=True (it has no end).",
                hint="Use blend_epochized for a finite blend with repeat=False.",
            )

    def start(self, epoch: int) -> list[int]:
        """Counts at the start of pass ``epoch``."""
        if self.spec.kind == "epochized":
            return [int(a) * epoch for a in self.allotments]
        return [
            epoch_start(p, epoch) if n else 0 for p, n in zip(self.plans, self.lengths, strict=True)
        ]

    def end(self, counts: Sequence[int], epoch: int) -> list[int] | None:
        """Counts at which the current pass ends (None: it never ends).

        ``epoch`` is the pass number (repeat=False); with repeat=True only epochized blends have
        passes, and the current one follows from the counts.
        """
        if self.spec.kind == "epochized":
            if self.repeat:
                done = [
                    c // a for c, a in zip(counts, self.allotments.tolist(), strict=True) if a > 0
                ]
                epoch = min(done, default=0)
            return [int(a) * (epoch + 1) for a in self.allotments]
        if self.repeat:
            return None
        start = self.start(epoch)
        return [s + (p.epoch_length(epoch) if n else 0) for s, p, n in
                zip(start, self.plans, self.lengths, strict=True)]  # fmt: skip

    def next_block(self, counts: Sequence[int], end: Sequence[int] | None, n: int) -> Int64Array:
        """Dataset ids of the next (up to) ``n`` references; empty when the pass is over."""
        own = counts[: len(self.lengths)]  # a sized blend's size totals follow
        live = [
            size > 0 and (end is None or c < e)
            for size, c, e in zip(self.lengths, own, end or own, strict=True)
        ]
        if not any(live):
            return np.zeros(0, np.int64)
        kind = self.spec.kind
        if kind in ("single", "concat"):
            d = live.index(True)
            left = n if end is None else min(n, end[d] - counts[d])
            return np.full(left, d, dtype=np.int64)
        if self.sized:
            return self._sized_next(counts, live)
        if kind == "weighted" and self.rates is not None:
            return scheduled_choices(counts, n, self.rates, seed=self.seed)
        if kind == "weighted":  # datasets without samples in this stream take no part
            ids = [d for d, ok in enumerate(live) if ok]
            weights = [self.spec.factors[d] for d in ids]
            base = [0] * len(own) if self.origin is None else self.origin.tolist()
            picked = weighted_choices(
                [counts[d] - base[d] for d in ids], weights, n, seed=self.seed, stream=self.stream
            )
            return np.asarray(ids, dtype=np.int64)[picked]
        if end is None:
            raise RuntimeError("internal: an epochized blend always has a pass end")
        base = [e - int(a) for e, a in zip(end, self.allotments.tolist(), strict=True)]
        within = [c - b for c, b in zip(counts, base, strict=True)]
        picked = epochized_choices(within, self.allotments, n, seed=self.seed, stream=self.stream)
        return np.asarray(picked, dtype=np.int64)

    def _sized_next(self, values: Sequence[int], live: Sequence[bool]) -> Int64Array:
        """The one next dataset id of a sized blend; ``values`` = counts, then size totals."""
        n = len(self.lengths)
        if self.rates is not None:
            batch = sum(values[:n]) // self.batch_size
            q = self.rates.shares(batch, batch + 1)[:, 0].tolist()
        else:
            total = sum(f for f, ok in zip(self.spec.factors, live, strict=True) if ok)
            q = [round(f / total * Q) if ok else 0 for f, ok in
                 zip(self.spec.factors, live, strict=True)]  # fmt: skip
        d = sized_choice(values[n:], [x if ok else 0 for x, ok in zip(q, live, strict=True)])
        return np.zeros(0, np.int64) if d is None else np.array([d], np.int64)

    def refs(self, dataset: int, lo: int, hi: int) -> Int64Array:
        """Global sample indices of ``dataset`` at its stream positions [lo, hi)."""
        return self.plans[dataset].refs_at(lo, hi)


def stream_allotments(sizes: Int64Array, repetitions: Sequence[float], stream: int) -> list[int]:
    """This stream's per-dataset allotment for an epochized blend (sizes: datasets x streams)."""
    return [int(a) for a in epochized_allotments(sizes, list(repetitions))[:, stream]]
