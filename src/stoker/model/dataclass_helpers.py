"""``edataclass``: Energon's shorthand for ``@dataclass(kw_only=True, slots=True)``.

Samples and batches are keyword-only, slotted dataclasses, so a subclass may re-declare a base
field without a default, or add fields without defaults, even after fields that have one.

Example:
    >>> from stoker import Sample
    >>> @edataclass
    ... class Scored(Sample):
    ...     score: float
    >>> Scored(__key__="k", __restore_key__=(), score=0.5).score
    0.5
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

try:
    from typing_extensions import dataclass_transform
except ImportError:  # pragma: no cover - without typing_extensions: a plain decorator

    def dataclass_transform(**_: Any) -> Callable[[T], T]:  # type: ignore[misc]
        return lambda fn: fn


@dataclass_transform(kw_only_default=True)
def edataclass(cls: type[T]) -> type[T]:
    """Make ``cls`` a dataclass with keyword-only fields and ``__slots__``.

    For other options, use ``dataclass`` directly, e.g.
    ``@dataclass(slots=True, kw_only=True, eq=False)``.
    """
    return dataclass(kw_only=True, slots=True)(cls)


__all__ = ["edataclass"]
