"""References to samples, for the stages that hold samples across batches (packing, grouping).

A sample read by a stream is ``(dataset, count, output)``: output ``output`` of
``encode_sample`` on the reference at position ``count`` of that dataset's stream plan. A stage
extends the references of what it takes in (a packed sample: ``(output, *member references)``),
saves the references it holds, and on restore asks its upstream to :meth:`RefSource.reread`
them: plain ints, so the state stays JSON-safe and is cheap to make.
"""

from __future__ import annotations

import array
import base64
import itertools
import sys
import zlib
from abc import abstractmethod
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import StokerError
from stoker.pipeline.node import Node

#: A sample's reference (see the module docstring).
Ref = tuple[int, ...]
#: What content-dependent stages hold, by stage name (``"pack"``, ``"group"``): plain data.
Buffers = dict[str, Any]


class RefSource(Node[tuple[Any, "Position", Ref]]):
    """A node of samples with their references that can re-read by reference (a stream or a
    stage over one)."""

    #: The stream position after the last sample handed out.
    position: Position

    def runs(self) -> Runs | None:
        """The samples from here on, many at a time (:class:`Runs`), where this source can
        hand them out so (its items and :meth:`runs` are one sequence: use one of them);
        None where it hands them out one by one only."""
        return None

    @abstractmethod
    def reread(self, refs: Sequence[Ref]) -> list[Any]:
        """The samples at ``refs``, read (and made) again."""

    @abstractmethod
    def where(self, ref: Ref) -> str:
        """Where the sample at ``ref`` comes from, for messages."""


class Runs:
    """A source's samples taken in lists: :meth:`take` ``(n)`` gives the next ``n`` (fewer only
    at the end) and the position after the last, or None after the end.

    It drives a generator that is sent how many samples to give and yields each list with its
    last sample's position and reference (primed here), so a source makes only the samples
    asked for: each user hook runs when it would one sample at a time.
    """

    __slots__ = ("_chunks",)

    def __init__(self, chunks: Generator[tuple[list[Any], Position, Ref], int, None]) -> None:
        next(chunks)
        self._chunks = chunks

    def take(self, n: int) -> tuple[list[Any], Position] | None:
        """The next ``n`` samples and the position after them; None at the end."""
        try:
            samples, position, _ = self._chunks.send(n)
        except StopIteration:
            return None
        return samples, position

    def close(self) -> None:
        self._chunks.close()


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


#: Prefix of :func:`encode_groups` text (its format version).
_CODEC = "refs1:"


def encode_groups(groups: Sequence[Sequence[Ref]]) -> str:
    """Groups of references of one width as one short JSON-safe string (see :func:`decode_groups`).

    Compressed; beyond 256 references delta-encoded column by column first (a buffer holds mostly
    nearby stream positions, so the differences are small): a buffer of 10 000 samples takes a
    few KB instead of ~40 000 ints. Made once per packing round, so its cost is not per batch.

    Example:
        >>> text = encode_groups([[(0, 7, 0, 0), (0, 8, 0, 0)], [], [(1, 3, 1, 0)]])
        >>> decode_groups(text)
        [[(0, 7, 0, 0), (0, 8, 0, 0)], [], [(1, 3, 1, 0)]]
    """
    refs = list(itertools.chain.from_iterable(groups))
    width = len(refs[0]) if refs else 0
    if len(refs) > 256:  # delta-encoded column by column: neighbours differ little
        table = np.array(refs, dtype=np.int64).reshape(len(refs), width)
        deltas = np.diff(table, axis=0, prepend=np.zeros((1, width), np.int64)).T
        small = int(np.abs(deltas).max()) < 2**31
        body = deltas.astype("<i4" if small else "<i8").tobytes()
        header = [width, len(groups), 4 if small else 8, 1]
    else:  # few: as they are (cheaper to make)
        values = list(itertools.chain.from_iterable(refs))
        if len(values) != width * len(refs):
            raise StokerError("internal: the references of one buffer must have one width.")
        body = _little(values)
        header = [width, len(groups), 8, 0]
    raw = _little([*header, *(len(g) for g in groups)]) + body
    return _CODEC + base64.b64encode(zlib.compress(raw, 1)).decode("ascii")


def _little(values: list[int]) -> bytes:
    """``values`` as little-endian int64 bytes."""
    packed = array.array("q", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def decode_groups(text: str) -> list[list[Ref]]:
    """The groups of :func:`encode_groups`; a clear error for text it did not make."""
    try:
        if not text.startswith(_CODEC):
            raise ValueError(f"no {_CODEC!r} prefix")
        raw = zlib.decompress(base64.b64decode(text[len(_CODEC) :]))
        width, count, itemsize, delta = np.frombuffer(raw[:32], "<i8").tolist()
        sizes = np.frombuffer(raw[32 : 32 + 8 * count], "<i8").tolist()
        body = np.frombuffer(raw[32 + 8 * count :], f"<i{itemsize}").astype(np.int64)
        if any(n < 0 for n in sizes) or sum(sizes) * width != len(body) or width < 0:
            raise ValueError("group sizes do not match the references")
    except (ValueError, TypeError, zlib.error) as e:
        raise StokerError(
            f"a saved buffer's references are not readable ({e}).",
            hint="Restore from the state as save_state_rank() returned it, unmodified.",
        ) from e
    if not width:
        values = np.zeros((sum(sizes), 0), np.int64)
    elif delta:
        values = np.cumsum(body.reshape(width, -1).T, axis=0)
    else:
        values = body.reshape(-1, width)
    refs = [tuple(row) for row in values.tolist()]
    out, at = [], 0
    for n in sizes:
        out.append(refs[at : at + n])
        at += n
    return out


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


def position(counts: tuple[int, ...], skip: int = 0) -> Position:
    """``Position(counts, skip)``, made about 4x faster than by the frozen ``__init__`` (a
    stream makes one per sample).

    Example:
        >>> position((3, 1), 2) == Position((3, 1), 2)
        True
    """
    made = _new(Position)
    state = made.__dict__
    state["counts"] = counts
    state["skip"] = skip
    return made


_new = object.__new__
