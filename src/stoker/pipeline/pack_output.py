"""What ``select_samples_to_pack`` may return instead of a list of groups (Energon's next release).

:class:`PackedSamplesOutput` carries the groups to pack and the samples to *push back*: those
stay in the packing buffer, ahead of the samples read next and in the order given, and take part
in the next selection. A buffered sample that is neither packed nor pushed back is dropped (as in
Energon), but never silently: it is logged and counted under :data:`NOT_PUSHED_BACK`.

Example:
    >>> out = PackedSamplesOutput(packs=[["a", "b"]], pushback=["c"])
    >>> out.packs, tuple(out.pushback)
    ([['a', 'b']], ('c',))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T_sample = TypeVar("T_sample")

#: Skip reason of a buffered sample a ``PackedSamplesOutput`` neither packed nor pushed back.
NOT_PUSHED_BACK = "select_samples_to_pack: neither packed nor pushed back"


@dataclass(slots=True, frozen=True)
class PackedSamplesOutput(Generic[T_sample]):
    """The groups to pack (one list of buffered samples per pack), and the buffered samples to
    keep in the packing buffer for the next selection (``pushback``, in this order)."""

    packs: list[list[T_sample]]
    pushback: Sequence[T_sample] = field(default_factory=tuple)


def split_selection(result: Any) -> tuple[list[Any], list[Any] | None]:
    """``select_samples_to_pack``'s result as (groups, pushed-back samples or None for a plain
    list of groups, where the samples no group takes stay in the buffer)."""
    if isinstance(result, PackedSamplesOutput):
        return list(result.packs), list(result.pushback)
    return list(result), None
