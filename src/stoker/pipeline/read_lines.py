"""JSONL lines as raw samples: the one place a line becomes a :class:`RawSample` (key: the line
number as text, one part ``json``: the line without surrounding whitespace).

:func:`line_sample` makes one; :func:`line_samples` many at once (the per-line work in C loops);
:class:`LineRaws` holds a run of cut lines and makes each sample only when asked for.
:func:`read_lines` reads a run of lines of one file, cut in one go where read-ahead blocks hold
them all.

Example:
    >>> line_sample(b'{"a": 1}', "a.jsonl", 3, 120)
    RawSample(key='3', parts={'json': b'{"a": 1}'}, shard='a.jsonl', index=3, offset=120)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from itertools import repeat
from typing import overload

import numpy as np
import numpy.typing as npt

from stoker.format.tar_members import RawSample, new_raw
from stoker.pipeline.local_blocks import LocalBlocks
from stoker.pipeline.reader_parts import ReaderParts

#: A read-ahead block: (its first byte, its end, its bytes).
Block = tuple[int, int, bytes]


def line_sample(line: bytes, shard: str, index: int, start: int) -> RawSample:
    """The raw sample of line ``index`` of ``shard`` (``line``: stripped), which starts at byte
    ``start``."""
    return new_raw(RawSample, (str(index), {"json": line}, shard, index, start))


def line_samples(
    lines: list[bytes], indices: Sequence[int], starts: list[int], shard: str
) -> Iterator[RawSample]:
    """:func:`line_sample` of each line (``lines[i]`` is line ``indices[i]``, at ``starts[i]``)."""
    parts = [{"json": line} for line in lines]
    # repeat() has no end: the lists (of one length) end the zip.
    fields = zip(map(str, indices), parts, repeat(shard), indices, starts, strict=False)
    return map(new_raw, repeat(RawSample), fields)


def cut_lines(
    held: list[Block], first: npt.NDArray[np.int64], last: npt.NDArray[np.int64]
) -> tuple[list[bytes], list[int]]:
    """The stripped bytes of the lines ``first[i]`` to ``last[i]`` (each held whole in block
    ``held[i]``) and their starts."""
    starts = first.tolist()
    # A line's final newline is cut off with the slice: strip() then copies it no more.
    lines = [
        data[a - at : b - at - 1] if b > a and data[b - at - 1] == 10 else data[a - at : b - at]
        for (at, _, data), a, b in zip(held, starts, last.tolist(), strict=True)
    ]
    return list(map(bytes.strip, lines)), starts


def locate_lines(
    offsets: npt.NDArray[np.uint64], indices: Sequence[int], shard: str, blocks: LocalBlocks
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[Block | None]] | None:
    """The byte ranges ``[first, last)`` of lines ``indices`` of ``shard`` and the read-ahead
    block holding each (None where none does); None if an index is outside the file's index."""
    picked = np.asarray(indices, dtype=np.int64)
    count = len(offsets) - 1
    if len(picked) == 0 or int(picked.min()) < 0 or int(picked.max()) >= count:
        return None
    first = offsets[picked].astype(np.int64)
    last = offsets[picked + 1].astype(np.int64)
    return first, last, blocks.locate(shard, first, last)


def read_lines(
    offsets: npt.NDArray[np.uint64],
    indices: Sequence[int],
    shard: str,
    blocks: LocalBlocks,
    read: Callable[[int, int], bytes],
    out: list[RawSample],
) -> int:
    """Lines ``indices`` of ``shard`` onto ``out`` while they are in its index and read whole
    (``read(start, end)`` reads what no block holds); how many were read."""
    located = locate_lines(offsets, indices, shard, blocks)
    if located is None:
        return 0
    first, last, held = located
    if None not in held:  # all read ahead: cut in one go
        lines, starts = cut_lines(held, first, last)  # type: ignore[arg-type]
        out.extend(line_samples(lines, indices, starts, shard))
        return len(held)
    append, done = out.append, 0
    for index, start, end, block in zip(indices, first.tolist(), last.tolist(), held, strict=True):
        data = read(start, end) if block is None else block[2][start - block[0] : end - block[0]]
        if len(data) != end - start:
            break
        append(line_sample(data.strip(), shard, index, start))
        done += 1
    return done


class LazyRaws(Sequence[RawSample]):
    """A run of raw samples of one shard, each made only when asked for (:meth:`_make`)."""

    __slots__ = ()

    def _make(self, at: int) -> RawSample:
        raise NotImplementedError

    @overload
    def __getitem__(self, at: int) -> RawSample: ...

    @overload
    def __getitem__(self, at: slice) -> Sequence[RawSample]: ...

    def __getitem__(self, at: int | slice) -> RawSample | Sequence[RawSample]:
        if isinstance(at, slice):
            return [self._make(i) for i in range(*at.indices(len(self)))]
        return self._make(at)


class LineRaws(LazyRaws):
    """The raw samples of JSONL lines cut in one go (:meth:`ShardReader.line_run
    <stoker.pipeline.read.ShardReader.line_run>`), each made only when asked for: a run's raw
    samples serve only to report a failure or to go one by one, rarely."""

    __slots__ = ("indices", "lines", "shard", "starts")

    def __init__(
        self, lines: list[bytes], indices: Sequence[int], starts: list[int], shard: str
    ) -> None:
        self.lines, self.indices, self.starts, self.shard = lines, indices, starts, shard

    @staticmethod
    def cut(
        offsets: npt.NDArray[np.uint64], indices: Sequence[int], shard: str, blocks: LocalBlocks
    ) -> LineRaws | None:
        """The lines ``indices`` of ``shard`` if read-ahead blocks hold them all, else None."""
        located = locate_lines(offsets, indices, shard, blocks)
        if located is None or None in located[2]:
            return None
        lines, starts = cut_lines(located[2], located[0], located[1])  # type: ignore[arg-type]
        return LineRaws(lines, indices, starts, shard)

    def __len__(self) -> int:
        return len(self.lines)

    def _make(self, at: int) -> RawSample:
        return line_sample(self.lines[at], self.shard, self.indices[at], self.starts[at])


class JsonlRuns(ReaderParts):
    """:meth:`~stoker.pipeline.read.ShardReader.read_run` of the lines of one local JSONL file,
    and :meth:`line_run` (a part of :class:`~stoker.pipeline.read.ShardReader`)."""

    def line_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> LineRaws | None:
        """The JSONL lines ``indices`` of one file, cut in one go, where :meth:`read_run` would
        read them all from read-ahead blocks (None otherwise: :meth:`read_run` then reads them,
        or reports what fails)."""
        if not self.jsonl or not shard_ids or min(shard_ids) != max(shard_ids):
            return None
        shard = self.shards[shard_ids[0]]
        offsets = self._offsets.get(shard)
        return None if offsets is None else LineRaws.cut(offsets, indices, shard, self._blocks)

    def _lines(self, shard_id: int, indices: Sequence[int], out: list[RawSample]) -> int:
        """Read JSONL lines ``indices`` of one file into ``out`` while they are in its index and
        read whole (else :meth:`read` takes over and reports); how many were read."""
        shard = self.shards[shard_id]
        offsets = self._offsets.get(shard)
        if offsets is None:
            offsets = self.offsets(shard_id)
        read = partial(self._read, shard_id)
        return read_lines(offsets, indices, shard, self._blocks, read, out)
