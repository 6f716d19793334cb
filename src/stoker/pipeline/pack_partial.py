"""``PartialSample``: part of a buffered sample, chosen by ``select_samples_to_pack``.

The task encoder splits a sample where it likes (``slice`` is its own, e.g. a token range): one
``PartialSample`` goes into a pack, another is pushed back (``PackedSamplesOutput.pushback``) and
leads a later selection, where it may be split again. The hooks after selection
(``postencode_sample``, ``pack_selected_samples``) receive the ``PartialSample``.

In the packing buffer a partial sample is its whole sample's reference plus its ``slice``; the
saved state lists the slices by place (:func:`slices_of`), so a restore re-reads the whole sample
and wraps it again (:func:`wrap`). A pack member's restore key is
``("PartialSample", the member's key, slice)``, which ``restore_sample`` rebuilds.

Example:
    >>> part = PartialSample(sample={"__restore_key__": ("Webdataset", "d", 3)}, slice=(0, 5))
    >>> part.__restore_key__
    ('PartialSample', ('Webdataset', 'd', 3), (0, 5))
    >>> as_tuples([[0, 5], "x"])
    ((0, 5), 'x')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from stoker.pipeline.batching import restore_key_of

T_sample = TypeVar("T_sample")
T_slice = TypeVar("T_slice")

#: The first element of a partial sample's restore key.
PARTIAL_KEY = "PartialSample"


@dataclass
class PartialSample(Generic[T_sample, T_slice]):
    """The part ``slice`` (the task encoder's own description, e.g. a token range) of
    ``sample``."""

    sample: T_sample
    slice: T_slice
    __restore_key__: tuple[Any, ...] | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        inner = restore_key_of(self.sample)
        if inner is not None:
            self.__restore_key__ = (PARTIAL_KEY, inner, self.slice)


def base_of(sample: Any) -> Any:
    """The whole sample a buffered (possibly partial) sample is part of."""
    return sample.sample if isinstance(sample, PartialSample) else sample


def member_key(member: Any, key: Any) -> Any:
    """The restore key of a pack member made from ``member`` (whose output has ``key``)."""
    if not isinstance(member, PartialSample) or key == member.__restore_key__:
        return key  # (the output is the member itself: its key names the slice already)
    return (PARTIAL_KEY, key if key is not None else restore_key_of(member.sample), member.slice)


def as_tuples(value: Any) -> Any:
    """``value`` with its lists made tuples (slices come back from JSON as lists)."""
    if isinstance(value, list | tuple):
        return tuple(as_tuples(v) for v in value)
    return value


def as_lists(value: Any) -> Any:
    """``value`` with its tuples made lists (JSON-safe)."""
    if isinstance(value, list | tuple):
        return [as_lists(v) for v in value]
    return value


def slices_of(stages: list[list[Any]]) -> list[list[Any]]:
    """``[[stage, place, slice], ...]`` for the partial samples of ``stages`` (lists of samples)."""
    return [
        [s, p, as_lists(sample.slice)]
        for s, stage in enumerate(stages)
        for p, sample in enumerate(stage)
        if isinstance(sample, PartialSample)
    ]


def wrap(sample: Any, part: Any) -> Any:
    """``sample`` re-read, as the partial sample ``part`` (a saved slice) of it."""
    return PartialSample(sample=sample, slice=as_tuples(part))
