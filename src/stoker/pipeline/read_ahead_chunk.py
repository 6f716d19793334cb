"""A request of the read-ahead with its state, and which of a reader's requests holds a range.

Each request a reader announces to its process's :class:`~stoker.pipeline.read_ahead.ReadAhead`
is a :class:`Chunk`: queued (no future yet), in flight, or received; it counts the reads still
expected of it, and is let go when none are.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from stoker.pipeline.prefetch_plan import Request, ShardSamples


@dataclass(eq=False)
class Chunk:
    """A request of one reader with its state: queued (no future), in flight or received."""

    reader: int
    request: Request
    wanted: int = 0  # reads of its samples still expected
    touched: int = 0  # the read tick of the last use
    submitted: int = 0  # the read tick when it was submitted
    used: bool = False  # a read took from it
    urgent: bool = False  # needed by the first reads of a cold start: fetched whatever the lead
    future: Future[bytes] | None = None
    dropped: bool = False
    data: bytes | None = None  # the bytes received, once a run took from it (take_held)


def not_covered(shard: ShardSamples, chunks: list[Chunk]) -> ShardSamples:
    """The samples of ``shard`` that no chunk of ``chunks`` (requests of one reader and shard)
    holds; each sample held counts as one more read of the first chunk that holds it."""
    starts, ends = shard.starts, shard.ends
    taken = np.zeros(len(starts), dtype=bool)
    for chunk in chunks:
        inside = (starts >= chunk.request.start) & (ends <= chunk.request.end) & ~taken
        held = int(np.count_nonzero(inside))
        if held:
            chunk.wanted += held
            taken |= inside
    if not taken.any():
        return shard
    keep = ~taken
    return ShardSamples(shard.name, shard.places[keep], starts[keep], ends[keep])


def covering(chunks: list[Chunk], start: int, end: int) -> Chunk | None:
    """The first of ``chunks`` (requests of one reader and shard) that holds ``[start, end)``."""
    for chunk in chunks:
        request = chunk.request
        if request.start <= start and end <= request.end:
            return chunk
    return None
