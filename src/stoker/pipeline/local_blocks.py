"""Small samples of local shards read ahead in coalesced blocks, one ``pread`` per block.

A reader that knows which samples come next (the plan's prefetch hint) reads each run of nearby
samples with one system call and keeps the bytes; each sample's read is then a slice. That saves a
system call per sample, which is most of the cost of reading a 500-byte JSONL line. Only hints
whose bytes fit a small budget are read this way (small samples); larger ones are left to the
page cache hints (``posix_fadvise``).

Example:
    >>> blocks = LocalBlocks()
    >>> blocks.add({"a.jsonl": [(0, 10, b"0123456789")]})
    >>> blocks.take("a.jsonl", 2, 5)
    b'234'
    >>> blocks.take("a.jsonl", 8, 12) is None  # not all of it held
    True
"""

from __future__ import annotations

import bisect
import collections
from typing import Any

import numpy as np
import numpy.typing as npt

#: The bytes one hint may read ahead into memory (larger hints only advise the page cache).
HINT_BUDGET = 16 << 20
#: Hints kept: the one being read and the next one (the stream hints a block ahead).
KEEP_HINTS = 2

#: Per shard: the sorted block starts, and (start, end, bytes) of each block.
_Blocks = tuple[list[int], list[tuple[int, int, bytes]]]


class LocalBlocks:
    """The blocks read for the last :data:`KEEP_HINTS` hints, found by shard and byte range."""

    def __init__(self) -> None:
        self._hints: collections.deque[dict[str, _Blocks]] = collections.deque(maxlen=KEEP_HINTS)
        #: The block the last take found: (shard, start, end, bytes); the next is often there.
        self._last: tuple[str, int, int, bytes] | None = None
        #: Per (hint, shard): its blocks' starts and ends as arrays (:meth:`locate`).
        self._arrays_of: dict[tuple[int, str], Any] = {}

    def add(self, blocks: dict[str, list[tuple[int, int, bytes]]]) -> None:
        """Keep the blocks of one hint (each shard's sorted by start); drops the oldest hint."""
        self._hints.append({name: ([b[0] for b in bs], bs) for name, bs in blocks.items()})
        self._last = None
        live = {id(hint) for hint in self._hints}
        self._arrays_of = {k: v for k, v in self._arrays_of.items() if k[0] in live}

    def take(self, name: str, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` of shard ``name`` if a kept block holds all of them."""
        last = self._last
        if last is not None and last[0] == name and last[1] <= start and end <= last[2]:
            return last[3][start - last[1] : end - last[1]]
        found = self.block(name, start, end)
        return None if found is None else found[2][start - found[0] : end - found[0]]

    def block(self, name: str, start: int, end: int) -> tuple[int, int, bytes] | None:
        """``(block start, block end, bytes)`` of the kept block of shard ``name`` that holds
        all of ``[start, end)``, if any (callers that read many samples keep it at hand).

        Hints are looked at oldest first: the stream reads the samples of the older hint while
        the newer one (its next block) is read ahead. Bytes held by both are the same bytes.
        """
        for hint in self._hints:
            found = hint.get(name)
            if found is None:
                continue
            starts, blocks = found
            i = bisect.bisect_right(starts, start) - 1
            if i >= 0:
                block_start, block_end, data = blocks[i]
                if end <= block_end and len(data) == block_end - block_start:
                    self._last = (name, block_start, block_end, data)
                    return block_start, block_end, data
        return None

    def locate(
        self, name: str, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
    ) -> list[tuple[int, int, bytes] | None]:
        """:meth:`block` of each ``[starts[i], ends[i])`` of shard ``name`` (None where no kept
        block holds it), looked up for all at once: for many small samples of one shard."""
        out: list[tuple[int, int, bytes] | None] = [None] * len(starts)
        todo = np.arange(len(starts))
        # Oldest first (see block): all of a run are then mostly in the first hint looked at.
        for hint in self._hints:
            found = hint.get(name)
            if found is None or len(todo) == 0:
                continue
            block_starts, block_ends, blocks = self._arrays(hint, name, found)
            at = np.searchsorted(block_starts, starts[todo], "right") - 1
            held = (at >= 0) & (ends[todo] <= block_ends[np.maximum(at, 0)])
            if len(todo) == len(starts) and held.all():  # the common case: all in this hint
                return list(map(blocks.__getitem__, at.tolist()))
            for k, i in zip(todo[held].tolist(), at[held].tolist(), strict=True):
                out[k] = blocks[i]
            todo = todo[~held]
        return out

    def _arrays(
        self, hint: dict[str, _Blocks], name: str, found: _Blocks
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[tuple[int, int, bytes]]]:
        """The block starts and ends of shard ``name`` in ``hint`` as arrays (made once; a
        block read short ends at its start, so that it holds nothing)."""
        key = (id(hint), name)
        arrays = self._arrays_of.get(key)
        if arrays is None or arrays[2] is not found[1]:
            blocks = found[1]
            block_starts = np.array([b[0] for b in blocks], np.int64)
            full = [b[1] if len(b[2]) == b[1] - b[0] else b[0] - 1 for b in blocks]
            arrays = self._arrays_of[key] = (block_starts, np.array(full, np.int64), blocks)
        return arrays

    def clear(self) -> None:
        self._hints.clear()
        self._last = None
        self._arrays_of.clear()
