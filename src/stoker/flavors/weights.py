"""Energon's weight objects (its pull request #208, ``megatron.energon.weights``) over stoker's.

Client code written for Energon's next release builds weights with these names; stoker's own
loader takes plain numbers and :class:`~stoker.WeightSchedule` (which these accept and return).
``compose_weights`` multiplies a flat pair and, as in Energon, refuses a schedule times a
schedule; a metadataset nests schedules under schedules all the same (stoker normalises each
level at every batch index, :mod:`stoker.plan.weights`).

Example:
    >>> sched = ScheduledWeight.from_points("step", {0: 10, 5: 0})
    >>> eval_weight(compose_weights(sched, 0.5), 0), eval_weight(sched, 5)
    (5.0, 0.0)
    >>> [round(eval_weight(w, 0), 3) for w in make_node_entry_weights([sched, 10.0])]
    [0.5, 0.5]
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from stoker.errors import ConfigError
from stoker.plan.weights import BlendWeights, WeightSchedule, parse_weight, weight_config


class WeightSpec(abc.ABC):
    """A blend weight as a function of the batch index (stoker's :class:`WeightSchedule` is
    one)."""

    is_scheduled: bool = True

    @abc.abstractmethod
    def evaluate(self, batch_idx: int) -> float:
        """The weight at ``batch_idx`` (>= 0)."""

    def scale_by(self, factor: float) -> WeightSpec:
        """This weight times a constant ``factor >= 0``."""
        return ScaledWeight(self, _number(factor))


WeightSpec.register(WeightSchedule)
ScheduledWeight = WeightSchedule
WeightLike: TypeAlias = float | WeightSpec | WeightSchedule


@dataclass(frozen=True)
class ConstantWeight(WeightSpec):
    """A weight that does not change."""

    value: float
    is_scheduled: bool = False

    def __post_init__(self) -> None:
        _number(self.value)

    def evaluate(self, batch_idx: int) -> float:
        return float(self.value)


@dataclass(frozen=True)
class ScaledWeight(WeightSpec):
    """``inner`` times a constant."""

    inner: WeightLike
    scale: float

    def evaluate(self, batch_idx: int) -> float:
        return eval_weight(self.inner, batch_idx) * self.scale


@dataclass(frozen=True)
class NormalizedWeight(WeightSpec):
    """Entry ``index`` of a blend level, divided by the sum of the level at each batch index."""

    tree: BlendWeights
    index: int

    def evaluate(self, batch_idx: int) -> float:
        return float(self.tree.at([batch_idx])[self.index, 0])


def _number(value: object) -> float:
    weight = parse_weight(value)
    if isinstance(weight, WeightSchedule):
        raise ConfigError(f"expected a number, got the schedule {value!r}.")
    return weight


def is_scheduled_weight(weight: object) -> bool:
    """Whether ``weight`` changes with the batch index."""
    return isinstance(weight, WeightSpec) and bool(getattr(weight, "is_scheduled", True))


def eval_weight(weight: WeightLike, batch_idx: int) -> float:
    """A number, or a weight object evaluated at ``batch_idx``."""
    if isinstance(weight, WeightSchedule | WeightSpec):
        return _number(weight.evaluate(batch_idx))
    return _number(float(weight))


def weight_from_config(weight: Any) -> WeightLike:
    """``None`` -> 1.0, a number -> float, ``{step|linear: {...}}`` -> a schedule; weight objects
    pass through."""
    if weight is None:
        return 1.0
    if isinstance(weight, WeightSpec):
        return weight
    return parse_weight(weight)


def weight_to_config(weight: WeightLike) -> Any:
    """A JSON-safe form of a weight (for logs and configs)."""
    if isinstance(weight, WeightSchedule):
        return weight_config(weight)
    if isinstance(weight, ConstantWeight):
        return float(weight.value)
    if isinstance(weight, WeightSpec):
        return repr(weight)
    return float(weight)


def compose_weights(inner: Any, outer: Any) -> WeightLike:
    """``inner * outer``; a schedule times a schedule is refused (as in Energon's flat API)."""
    a, b = weight_from_config(inner), weight_from_config(outer)
    if is_scheduled_weight(a) and is_scheduled_weight(b):
        raise ConfigError(
            "compose_weights multiplies a weight by a constant; both are schedules here.",
            hint="Nest the blends in a metadataset instead: stoker normalises each level.",
        )
    if isinstance(a, WeightSpec):
        return ScaledWeight(a, eval_weight(b, 0))
    if isinstance(b, WeightSpec):
        return ScaledWeight(b, eval_weight(a, 0))
    return eval_weight(a, 0) * eval_weight(b, 0)


def make_node_entry_weights(entry_weights: Sequence[Any]) -> list[WeightLike]:
    """The entries of one blend level, each divided by the level's sum (per batch index when a
    schedule is among them)."""
    raw = [weight_from_config(w) for w in entry_weights]
    if any(is_scheduled_weight(w) for w in raw):
        level = tuple(w if isinstance(w, WeightSchedule) else eval_weight(w, 0) for w in raw)
        if any(isinstance(w, WeightSpec) and not isinstance(w, WeightSchedule) for w in raw):
            raise ConfigError("only numbers and WeightSchedule objects can share a blend level.")
        tree = BlendWeights(tuple(((level, i),) for i in range(len(level))))
        return [NormalizedWeight(tree, i) for i in range(len(raw))]
    values = [eval_weight(w, 0) for w in raw]
    total = sum(values)
    if total <= 0:
        raise ConfigError(f"the weights {values} of a blend level sum to 0.")
    return [v / total for v in values]
