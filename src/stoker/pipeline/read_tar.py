"""Runs of samples of local tar shards: each plain sample held in a read-ahead block parsed in
one loop (:func:`~stoker.format.tar_members.parse_simple`), any other read as one by one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.format.tar_members import RawSample, new_raw, parse_simple
from stoker.pipeline.reader_parts import ReaderParts

#: A shard index of up to this many offsets is made a list whole to look up a few samples in it
#: (cheaper than numpy for small shards); of a larger one, just the offsets needed are taken
#: (listing 10^4 offsets costs ~0.1 ms, and a run or hint may use a handful of them).
LIST_WHOLE = 1024


class LocalTarRuns(ReaderParts):
    """:meth:`~stoker.pipeline.read.ShardReader.read_run` of local tar shards (a part of
    :class:`~stoker.pipeline.read.ShardReader`)."""

    def _members(
        self, shard_ids: Sequence[int], indices: Sequence[int], out: list[RawSample]
    ) -> None:
        """Read tar samples into ``out``: plain ones held in read-ahead blocks in this loop,
        others by :meth:`read` (which reads and reports as for one)."""
        shards, cached, take = self.shards, self._offsets, self._blocks.take
        append, read = out.append, self.read
        # the offsets of this run's shards: lists of small indexes, else numpy (LIST_WHOLE)
        listed: dict[str, Any] = {}
        for shard_id, index in zip(shard_ids, indices, strict=True):
            shard = shards[shard_id]
            spans = listed.get(shard)
            if spans is None:
                offsets: Any = cached.get(shard)
                if offsets is not None:
                    whole = len(offsets) <= LIST_WHOLE
                    spans = listed[shard] = offsets.tolist() if whole else offsets
            if spans is not None and 0 <= index < len(spans) - 1:
                if type(spans) is list:
                    start, end = spans[index], spans[index + 1]
                else:
                    start, end = spans[index : index + 2].tolist()
                data = take(shard, start, end)
                if data is not None and len(data) == end - start:
                    simple = parse_simple(data)
                    if simple is not None:
                        append(new_raw(RawSample, (simple[0], simple[1], shard, index, start)))
                        continue
            append(read(shard_id, index))
