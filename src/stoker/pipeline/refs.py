"""References to samples, for the stages that hold samples across batches (packing, grouping).

A sample read by a stream is ``(dataset, count, output)``: output ``output`` of
``encode_sample`` on the reference at position ``count`` of that dataset's stream plan. A stage
extends the references of what it takes in (a packed sample: ``(output, *member references)``),
saves the references it holds, and on restore asks its upstream to :meth:`RefSource.reread`
them: plain ints, so the state stays JSON-safe and is cheap to make.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stoker.errors import StokerError

#: A sample's reference (see the module docstring).
Ref = tuple[int, ...]
#: What content-dependent stages hold, by stage name (``"pack"``, ``"group"``): plain data.
Buffers = dict[str, Any]


class RefSource(Protocol):
    """Samples with their references, and re-reading by reference (a stream or a stage)."""

    start: Position

    def with_refs(self) -> Iterator[tuple[Any, Position, Ref]]: ...

    def reread(self, refs: Sequence[Ref]) -> list[Any]: ...

    def where(self, ref: Ref) -> str:
        """Where the sample at ``ref`` comes from, for messages."""
        ...


def pick(outputs: Sequence[Any], index: int, what: str) -> Any:
    """Output ``index`` of a re-run hook, or a clear error if the hook now gives fewer."""
    if index >= len(outputs):
        raise StokerError(
            f"restoring a buffered sample: {what} gave {len(outputs)} output(s) this time, but "
            f"output #{index} was buffered when the state was saved.",
            hint="Hooks must give the same outputs for the same sample (mark random ones "
            "@stateless(restore_seeds=True)); restore with the same data and task encoder.",
        )
    return outputs[index]


def flat(refs: Iterable[Ref]) -> list[int]:
    """References of one length as one flat list (compact in JSON)."""
    return list(itertools.chain.from_iterable(refs))


def chunks(values: Sequence[int], size: int) -> list[Ref]:
    """The references of a :func:`flat` list."""
    return [tuple(int(v) for v in values[i : i + size]) for i in range(0, len(values), size)]


@dataclass(frozen=True)
class Position:
    """Where a stream resumes: per-dataset reference counts, minus ``skip`` used outputs."""

    counts: tuple[int, ...]
    skip: int = 0

    def to_list(self) -> list[int]:
        return [*self.counts, self.skip]

    @staticmethod
    def from_list(values: Sequence[int]) -> Position:
        return Position(tuple(int(v) for v in values[:-1]), int(values[-1]))
