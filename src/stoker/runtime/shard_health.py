"""Which shards of a stream failed in this pass, so that the rest of their samples are skipped
unread (each counted) rather than each failing again.

A shard is *damaged* after a skipped :class:`~stoker.errors.CorruptShardError` (scope
``shard``), *unreachable* after a read spent its retry budget (scope ``storage``: the storage did
not answer for that long). Samples a replaced worker was stuck on
(:data:`stoker.runtime.worker_watch.skipped`) are skipped the same way.

Example:
    >>> from stoker.errors import CorruptShardError
    >>> health = ShardHealth()
    >>> health.broken, health.note(CorruptShardError("bad header"), 0, 3), health.broken
    (False, None, True)
    >>> health.readable(0, [1, 2, 3, 4])
    [1, 2]
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from stoker.pipeline.sample_failure import scope_of
from stoker.pipeline.skip_policy import ErrorTracker
from stoker.pipeline.skips import REST_OF_SHARD, STORAGE
from stoker.runtime import worker_watch

if TYPE_CHECKING:
    from stoker.sources.source import DataSource


class ShardHealth:
    """The (dataset, shard) pairs of one stream found damaged or unreachable in this pass."""

    __slots__ = ("broken", "corrupt", "unreachable")

    def __init__(self) -> None:
        #: (dataset, shard) found damaged (a skipped :class:`CorruptShardError`).
        self.corrupt: set[tuple[int, int]] = set()
        #: (dataset, shard) whose read spent its retry budget.
        self.unreachable: set[tuple[int, int]] = set()
        #: Whether any shard is in either set (what the hot path tests).
        self.broken = False

    def note(self, error: Exception, d: int, shard_id: int) -> None:
        """Remember shard ``shard_id`` of dataset ``d`` if ``error`` (skipped) condemns it."""
        scope = scope_of(error)
        if scope == "shard":
            self.corrupt.add((d, shard_id))
        elif scope == "storage":
            self.unreachable.add((d, shard_id))
        else:
            return
        self.broken = True

    def readable(self, d: int, shard_ids: Sequence[int]) -> Sequence[int]:
        """``shard_ids`` (of dataset ``d``) up to the first shard that failed in this pass."""
        if not self.broken:
            return shard_ids
        bad = self.corrupt | self.unreachable
        return list(itertools.takewhile(lambda s: (d, s) not in bad, shard_ids))

    def unread(
        self, source: DataSource, d: int, shard_id: int, index: int, tracker: ErrorTracker
    ) -> bool:
        """Whether the sample at ``index`` of shard ``shard_id`` is skipped unread (its shard
        failed earlier in this pass, or a worker was stuck on it); then it is counted."""
        where = f"{source.shards[shard_id]}#{index}"
        if (d, shard_id) in self.corrupt:
            tracker.record(REST_OF_SHARD, source=source.path, key=where)
            return True
        if (d, shard_id) in self.unreachable:
            tracker.skipped_unread(STORAGE, source=source.path, key=where)
            return True
        if (d, shard_id, index) in worker_watch.skipped:  # a worker was stuck on it
            tracker.record(worker_watch.STUCK, source=source.path, key=where)
            return True
        return False


__all__ = ["ShardHealth"]
