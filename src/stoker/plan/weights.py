"""Blend weights that change over training: a schedule is a pure function of the batch index.

A weight is a number or a :class:`WeightSchedule`, written in a metadataset as Energon's
(pull request #208) ``weight: {step: {0: 100, 5000: 0}}`` or ``weight: {linear: {0: 100, 1000: 10,
2000: 0}}``. ``step`` takes the value of the last point at or before the index; ``linear``
interpolates between points; both hold the first value before the first point and the last after
the last one.

The x-axis is the **global batch index** ``j``: rank ``r`` of ``W`` yields global batches
``j = t * W + r`` (``t`` = its own batch count), so on one rank ``j`` is Energon's batch index and
the global batches are the same on every ranks x workers of the same virtual workers
(:mod:`stoker.plan.topology`).

A blend tree is flattened into leaves (:class:`BlendWeights`): each leaf's weight is the product,
down its path, of its entry's weight divided by the sum of its siblings' weights at that index
(normalised at each level, so a schedule may sit under a schedule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError

ScheduleKind = Literal["step", "linear"]
Float64Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WeightSchedule:
    """A blend weight as a function of the global batch index (see the module docstring).

    Example:
        >>> w = WeightSchedule.from_points("linear", {0: 100, 1000: 10, 2000: 0})
        >>> w.evaluate(500), w.evaluate(1500), w.evaluate(10**6)
        (55.0, 5.0, 0.0)
        >>> WeightSchedule.from_points("step", {0: 100, 5000: 0}).at([4999, 5000]).tolist()
        [100.0, 0.0]
    """

    kind: ScheduleKind
    points: tuple[tuple[int, float], ...]

    def __post_init__(self) -> None:
        if self.kind not in ("step", "linear"):
            raise ConfigError(f"unknown weight schedule {self.kind!r}; use 'step' or 'linear'.")
        if not self.points:
            raise ConfigError("a weight schedule needs at least one point {batch_index: weight}.")
        xs = [x for x, _ in self.points]
        if xs != sorted(set(xs)) or xs[0] < 0:
            raise ConfigError(
                f"weight schedule points must have distinct batch indices >= 0, got {xs}."
            )
        for x, y in self.points:
            if not math.isfinite(y) or y < 0:
                raise ConfigError(f"the weight at batch {x} must be finite and >= 0, got {y!r}.")

    @classmethod
    def from_points(cls, kind: ScheduleKind, points: Mapping[Any, Any]) -> WeightSchedule:
        """From ``{batch_index: weight}`` (YAML may give the keys as strings)."""
        try:
            items = sorted((int(k), float(v)) for k, v in points.items())
        except (TypeError, ValueError):
            raise ConfigError(
                f"weight schedule points must map integer batch indices to numbers, got "
                f"{dict(points)!r}."
            ) from None
        return cls(kind, tuple(items))

    def at(self, batch_index: npt.ArrayLike) -> Float64Array:
        """The weight at each of ``batch_index`` (an array of integers >= 0), vectorised."""
        b = np.asarray(batch_index, dtype=np.float64)
        xs = np.array([x for x, _ in self.points], dtype=np.float64)
        ys = np.array([y for _, y in self.points], dtype=np.float64)
        if self.kind == "linear":
            return np.interp(b, xs, ys)
        return ys[np.maximum(np.searchsorted(xs, b, side="right") - 1, 0)]

    def evaluate(self, batch_index: int) -> float:
        """The weight at one batch index."""
        if batch_index < 0:
            raise ConfigError(f"{batch_index=} must be >= 0.")
        return float(self.at([batch_index])[0])

    def knots(self) -> list[int]:
        """The batch indices where the schedule's points are."""
        return [x for x, _ in self.points]

    def to_config(self) -> dict[str, dict[int, float]]:
        """The YAML form, ``{kind: {index: weight}}``."""
        return {self.kind: dict(self.points)}


Weight: TypeAlias = float | WeightSchedule


def parse_weight(value: object) -> Weight:
    """A number, a :class:`WeightSchedule`, or the YAML form ``{step|linear: {index: weight}}``.

    Example:
        >>> parse_weight({"step": {"0": 2, "5": 0}}).evaluate(5)
        0.0
    """
    if isinstance(value, WeightSchedule):
        return value
    if isinstance(value, bool) or value is None:
        raise ConfigError(f"a weight must be a number or a schedule, got {value!r}.")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"a weight must be finite and >= 0, got {value!r}.")
        return float(value)
    if isinstance(value, Mapping) and len(value) == 1:
        kind, points = next(iter(value.items()))
        if kind in ("step", "linear") and isinstance(points, Mapping) and points:
            return WeightSchedule.from_points(kind, points)
    raise ConfigError(
        f"a weight must be a number or one schedule such as {{step: {{0: 100, 5000: 0}}}} or "
        f"{{linear: {{0: 100, 1000: 0}}}}, got {value!r}."
    )


def weights_at(weights: Sequence[Weight], batch_index: npt.ArrayLike) -> Float64Array:
    """``(len(weights), n)``: each weight at each batch index."""
    b = np.asarray(batch_index, dtype=np.int64)
    rows = [w.at(b) if isinstance(w, WeightSchedule) else np.full(b.shape, w) for w in weights]
    return np.stack(rows) if rows else np.zeros((0, b.size))


#: One level of a leaf's path: the weights of a blend's entries and the entry the path takes.
Level = tuple[tuple[Weight, ...], int]


@dataclass(frozen=True)
class BlendWeights:
    """The effective weight of each leaf of a blend tree, at any batch index.

    ``paths[d]`` lists, from the top blend down, the sibling weights of each level and the index
    of the entry leaf ``d`` is under.

    Example:
        >>> inner = (WeightSchedule.from_points("step", {0: 1, 10: 0}), 1.0)
        >>> tree = BlendWeights(((((1.0, 1.0), 0),), (((1.0, 1.0), 1), (inner, 0)),
        ...                      (((1.0, 1.0), 1), (inner, 1))))
        >>> tree.at([0, 10]).round(2).tolist()
        [[0.5, 0.5], [0.25, 0.0], [0.25, 0.5]]
    """

    paths: tuple[tuple[Level, ...], ...]

    @property
    def scheduled(self) -> bool:
        """Whether any weight on any path is a schedule."""
        return any(
            isinstance(w, WeightSchedule) for path in self.paths for sib, _ in path for w in sib
        )

    def at(self, batch_index: npt.ArrayLike) -> Float64Array:
        """``(leaves, n)``: each leaf's weight at each batch index (a level whose weights are all
        0 there gives its leaves 0)."""
        b = np.asarray(batch_index, dtype=np.int64).reshape(-1)
        shares: dict[tuple[Weight, ...], Float64Array] = {}
        out = np.ones((len(self.paths), b.size))
        for d, path in enumerate(self.paths):
            for siblings, index in path:
                share = shares.get(siblings)
                if share is None:
                    raw = weights_at(siblings, b)
                    total = raw.sum(axis=0)
                    share = np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)
                    shares[siblings] = share
                out[d] *= share[index]
        return out

    def knots(self) -> list[int]:
        """Every batch index where some schedule of the tree has a point."""
        found = {
            x
            for path in self.paths
            for siblings, _ in path
            for w in siblings
            if isinstance(w, WeightSchedule)
            for x in w.knots()
        }
        return sorted(found)

    def ramps(self) -> list[tuple[int, int]]:
        """The ``[first, last)`` batch indices of each linear schedule: outside them, and between
        two knots, every weight of the tree is constant."""
        found = {
            (w.points[0][0], w.points[-1][0])
            for path in self.paths
            for siblings, _ in path
            for w in siblings
            if isinstance(w, WeightSchedule) and w.kind == "linear" and len(w.points) > 1
        }
        return sorted(found)

    def to_config(self) -> list[list[Any]]:
        """A JSON-safe form (for fingerprints)."""
        return [[[[weight_config(w) for w in sib], i] for sib, i in path] for path in self.paths]

    @classmethod
    def from_config(cls, config: list[list[Any]]) -> BlendWeights:
        """The tree :meth:`to_config` wrote (a saved state's blend, rebuilt).

        Example:
            >>> tree = BlendWeights.from_config([[[[1, ["step", [[0, 1], [5, 0]]]], 1]]])
            >>> BlendWeights.from_config(tree.to_config()) == tree
            True
        """

        def weight(value: Any) -> Weight:
            if isinstance(value, list):
                return WeightSchedule.from_points(value[0], dict(value[1]))
            return float(value)

        return cls(
            tuple(
                tuple((tuple(weight(w) for w in sib), int(i)) for sib, i in path) for path in config
            )
        )


def weight_config(weight: Weight) -> Any:
    """A weight in JSON-safe form: the number, or ``[kind, [[index, weight], ...]]``."""
    if isinstance(weight, WeightSchedule):  # lists: JSON keeps them as they are
        return [weight.kind, [list(point) for point in weight.points]]
    return weight
