"""Runs of samples of remote shards: the first read as one by one, then those whose bytes the
read-ahead has received already, never waiting for one ahead of its turn."""

from __future__ import annotations

from collections.abc import Sequence

from stoker.format.tar_members import RawSample
from stoker.pipeline.reader_parts import ReaderParts


class RemoteRuns(ReaderParts):
    """:meth:`~stoker.pipeline.read.ShardReader.read_run` of remote shards (a part of
    :class:`~stoker.pipeline.read.ShardReader`)."""

    def _remote_run(
        self, shard_ids: Sequence[int], indices: Sequence[int], out: list[RawSample]
    ) -> None:
        """Samples of remote shards into ``out``: the first as :meth:`read` reads it (waiting
        for its request, retrying and reporting as for one sample), then the next ones whose
        bytes the read-ahead has received already, up to the first that is not: the run ends
        there, so a run never waits for a sample ahead of its turn, nor reports its failure
        (each is read when needed, as one by one)."""
        if not shard_ids:
            return
        out.append(self.read(shard_ids[0], indices[0]))
        ahead = self._ahead
        if ahead is None or len(shard_ids) == 1:
            return
        shards, cached = self.shards, self._offsets
        wanted: list[tuple[str, int, int]] = []
        for shard_id, index in zip(shard_ids[1:], indices[1:], strict=True):
            shard = shards[shard_id]
            offsets = cached.get(shard)
            if offsets is None or not 0 <= index < len(offsets) - 1:
                break  # read() reports it (or reads the index) when its turn comes
            start, end = offsets[index : index + 2].tolist()
            wanted.append((shard, start, end))
        held = ahead.take_held(wanted)
        sample, append = self._sample, out.append
        # zip ends with ``held``: the samples received so far.
        for (shard, start, end), index, data in zip(wanted, indices[1:], held, strict=False):
            append(sample(data, shard, index, start, end))
