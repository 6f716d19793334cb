"""Subset ranges: ``subset: {range: [a, b]}`` in a metadataset, composed over nesting levels.

A range is relative (``"10%"``, ``"90%"``: fractions of what is left) at any level, or absolute
(sample indices, ``[100, end]``) at a leaf only. Nested ranges compose like Energon's
``Subset.merge``: the innermost range is applied to the dataset first, each outer range within
what the inner one left. ``resolve`` then turns the result into sample indices exactly like
Energon's ``DatasetSubset.compute_subset``: absolute range first, then the relative one, with
``int()`` truncation.
"""

from __future__ import annotations

from dataclasses import dataclass

from stoker.errors import ConfigError


@dataclass(frozen=True)
class SubsetRange:
    """A consecutive part of a dataset: absolute ``(start, end|None)`` first, then ``[start, end)``.

    Example:
        >>> inner = SubsetRange(0.2, 1.0)  # the inner level keeps 20%-100%
        >>> inner.compose(SubsetRange(0.0, 0.5)).resolve(1000)  # the outer its first half
        (200, 600)
        >>> SubsetRange(0.0, 0.5, absolute=(100, None)).resolve(1000)
        (100, 550)
    """

    start: float = 0.0
    end: float = 1.0
    absolute: tuple[int, int | None] | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.start <= self.end <= 1.0:
            raise ConfigError(f"a relative subset needs 0 <= start <= end <= 1, got {self}.")
        if self.absolute is not None:
            first, last = self.absolute
            if first < 0 or (last is not None and last < first):
                raise ConfigError(f"an absolute subset needs 0 <= start <= end, got {self}.")

    def compose(self, outer: SubsetRange | None) -> SubsetRange:
        """This (inner) range with ``outer`` applied within it; ``outer`` must be relative."""
        if outer is None:
            return self
        if outer.absolute is not None:
            raise ConfigError(
                "absolute subset ranges (sample indices) are only allowed on a leaf dataset.",
                hint="Use percentages like ['10%', '50%'] on blends and nested metadatasets.",
            )
        # Same float operations as Energon's Subset.merge, so resolve() agrees to the sample.
        width = self.end - self.start
        return SubsetRange(
            self.start + outer.start * width, self.start + outer.end * width, self.absolute
        )

    def resolve(self, total_samples: int) -> tuple[int, int]:
        """The ``(start, end)`` sample indices of this subset in a split of ``total_samples``."""
        start, end = 0, total_samples
        if self.absolute is not None:
            start, last = self.absolute
            end = total_samples if last is None else last
            if end > total_samples:
                raise ConfigError(
                    f"the subset ends at sample {end}, but the split has only {total_samples}.",
                    hint="Lower the end of the absolute range, or use 'end'.",
                )
            if start > end:
                raise ConfigError(
                    f"the subset starts at sample {start}, but the split has only {total_samples}."
                )
        width = end - start
        return start + int(width * self.start), start + int(width * self.end)


def parse_range(values: object) -> SubsetRange:
    """A :class:`SubsetRange` from the YAML ``range: [a, b]`` list (raises ``ValueError``).

    Example:
        >>> parse_range(["10%", "end"])
        SubsetRange(start=0.1, end=1.0, absolute=None)
        >>> parse_range([100, "end"])
        SubsetRange(start=0.0, end=1.0, absolute=(100, None))
    """
    if not isinstance(values, list) or len(values) != 2:
        raise ValueError(f"expected a list [start, end], got {values!r}")
    first, last = values
    if _is_int(first):
        if not (_is_int(last) or last == "end"):
            raise ValueError(f"an absolute start needs an integer end or 'end', got {last!r}")
        end = last if _is_int(last) else None
        if first < 0 or (end is not None and end < first):
            raise ValueError(f"expected 0 <= start <= end, got {values!r}")
        return SubsetRange(absolute=(first, end))
    start = _percent(first, "start")
    # Energon accepts 'end' here in its grammar but then fails; stoker reads it as 100%.
    stop = 1.0 if last == "end" else _percent(last, "end")
    if start > stop:
        raise ValueError(f"the start {first!r} is after the end {last!r}")
    return SubsetRange(start, stop)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _percent(value: object, name: str) -> float:
    if not isinstance(value, str) or not value.strip().endswith("%"):
        raise ValueError(f"the {name} must be a percentage like '10%' or an integer, got {value!r}")
    try:
        percent = float(value.strip().removesuffix("%"))
    except ValueError:
        raise ValueError(f"the {name} {value!r} is not a number followed by '%'") from None
    if not 0 <= percent <= 100:
        raise ValueError(f"the {name} {value!r} is not between 0% and 100%")
    return percent / 100.0
