"""Reading samples by reference: (shard, index) -> the raw bytes of each part.

A reader keeps file handles and shard indexes open, reads one sample with one ranged read, and
is told which samples come next (the plan knows), so that it can ask the storage to fetch them
ahead: for local files, small samples are read at once in coalesced blocks (one ``pread`` per
block, :mod:`stoker.pipeline.local_blocks`) and larger ones get ``posix_fadvise(WILLNEED)`` on
coalesced byte ranges; for remote stores
coalesced ranged reads on a thread pool, whose bytes :meth:`ShardReader.read` then takes
(:mod:`stoker.pipeline.prefetch`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import CorruptShardError, FormatError, StorageError
from stoker.format.tar_index import load_offsets, local_offsets, tar_index_name
from stoker.format.tar_members import RawSample as RawSample
from stoker.format.tar_members import parse_sample, parse_simple
from stoker.pipeline.coalesce import coalesce, coalesce_lists, sorted_unique
from stoker.pipeline.column_raws import ColumnRaws
from stoker.pipeline.local_blocks import HINT_BUDGET, LocalBlocks
from stoker.pipeline.prefetch import Prefetcher, ShardSamples
from stoker.pipeline.read_lines import JsonlRuns, line_sample
from stoker.pipeline.read_lines import LineRaws as LineRaws
from stoker.pipeline.read_remote import RemoteRuns
from stoker.pipeline.read_tar import LIST_WHOLE, LocalTarRuns
from stoker.storage import Store

_MAX_OPEN = 256
#: A shard's hinted samples up to this many are looked up in plain lists (numpy beyond).
_FEW = 32
#: Local index files of at least this many bytes (32k samples) are memory-mapped, not read:
#: the processes that read one share its pages, which the kernel may drop and read again.
_MAP_BYTES = 1 << 18
#: Shard indexes read into memory that a reader keeps, in bytes (mapped ones weigh nothing):
#: ~400 shards of 10^4 samples. Without a bound, a worker that visits thousands of large
#: shards over a long run would keep all their indexes.
_OFFSETS_BYTES = 32 << 20
#: Shard indexes a reader keeps at most (read or mapped).
_OFFSETS_COUNT = 4096


class _LRU(OrderedDict[str, object]):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, name: str, value: object) -> None:
        self[name] = value
        self.move_to_end(name)
        while len(self) > self.limit:
            _, old = self.popitem(last=False)
            if isinstance(old, int):
                os.close(old)


class _OffsetsCache(OrderedDict[str, "npt.NDArray[np.uint64]"]):
    """Shard indexes, the oldest dropped first beyond :data:`_OFFSETS_COUNT` of them or
    :data:`_OFFSETS_BYTES` of those read into memory (the newest is always kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.held = 0  # bytes of the indexes read into memory

    def remember(self, name: str, offsets: npt.NDArray[np.uint64]) -> None:
        old = self.pop(name, None)
        if old is not None:
            self.held -= _weight(old)
        self[name] = offsets
        self.held += _weight(offsets)
        while len(self) > 1 and (len(self) > _OFFSETS_COUNT or self.held > _OFFSETS_BYTES):
            self.held -= _weight(self.popitem(last=False)[1])


def _weight(offsets: npt.NDArray[np.uint64]) -> int:
    """The memory an index holds of its own: none where it is a mapped file's pages."""
    return int(offsets.nbytes) if offsets.flags.writeable else 0


class ShardReader(LocalTarRuns, RemoteRuns, JsonlRuns):
    """Reads samples of tar shards (or lines of JSONL files) by (shard position, index).

    :meth:`read` reads one sample; :meth:`read_run` many, by kind: runs of local tar shards
    (:class:`~stoker.pipeline.read_tar.LocalTarRuns`), of remote shards
    (:class:`~stoker.pipeline.read_remote.RemoteRuns`) and of JSONL lines
    (:class:`~stoker.pipeline.read_lines.JsonlRuns`)."""

    def __init__(self, store: Store, shards: Sequence[str], *, jsonl: bool = False) -> None:
        self.store = store
        self.shards = list(shards)
        self.jsonl = jsonl
        self._offsets: _OffsetsCache = _OffsetsCache()
        self._fds: _LRU = _LRU(_MAX_OPEN)
        self._ahead: Prefetcher | None = None  # remote read-ahead, made on first use
        self._blocks = LocalBlocks()  # small local samples read ahead in coalesced blocks
        #: Whether the shards are local files: reading samples a run ahead costs nothing
        #: then (a run of remote samples takes only those the read-ahead has received).
        self.local = bool(self.shards) and store.local_path(self.shards[0]) is not None

    def offsets(self, shard_id: int) -> npt.NDArray[np.uint64]:
        """The N+1 sample offsets of a shard (cached)."""
        name = self.shards[shard_id]
        cached = self._offsets.get(name)
        if cached is None:
            index = tar_index_name(name)
            url, local = self.store.url(index), self.store.local_path(index)
            if local is None and self.jsonl:  # remote: one copy in the local metadata cache
                local = self.store.cached_local_path(index)
            cached = local_offsets(local, url, _MAP_BYTES) if local is not None else None
            if cached is None:
                cached = load_offsets(self.store.read_bytes(index), url)
            self._offsets.remember(name, cached)
        return cached

    def byte_range(self, shard_id: int, index: int) -> tuple[int, int]:
        offsets = self.offsets(shard_id)
        if not 0 <= index < len(offsets) - 1:
            raise FormatError(
                f"sample index {index} is outside the shard's index ({len(offsets) - 1} samples).",
                path=self.store.url(self.shards[shard_id]),
                hint="The dataset changed since it was prepared; run `stoker prepare` again.",
            )
        return int(offsets[index]), int(offsets[index + 1])

    def _read(self, shard_id: int, start: int, end: int) -> bytes:
        name = self.shards[shard_id]
        held = self._blocks.take(name, start, end)
        if held is not None:  # read ahead with its neighbours in one call
            return held
        local = self.store.local_path(name)
        if local is None:
            data = self._ahead.take(name, start, end) if self._ahead is not None else None
            return self.store.read_range(name, start, end - start) if data is None else data
        return os.pread(self._fd(name, local), end - start, start)

    def _fd(self, name: str, local: str) -> int:
        """The open handle of a local shard (kept in an LRU of open files)."""
        fd = self._fds.get(name)
        if fd is None:
            try:
                fd = os.open(local, os.O_RDONLY)
            except FileNotFoundError:
                raise StorageError(
                    "the shard is missing: it was deleted or moved after the dataset was prepared.",
                    path=self.store.url(name),
                    hint="Restore the shard, or run `stoker prepare` again.",
                ) from None
            self._fds.remember(name, fd)
        return fd  # type: ignore[return-value]

    def read(self, shard_id: int, index: int) -> RawSample:
        """The parts of sample ``index`` of shard ``shard_id``."""
        shard = self.shards[shard_id]
        offsets = self._offsets.get(shard)
        if offsets is None or not 0 <= index < len(offsets) - 1:
            start, end = self.byte_range(shard_id, index)
        else:
            start, end = offsets[index : index + 2].tolist()
        return self._sample(self._read(shard_id, start, end), shard, index, start, end)

    def _sample(self, data: bytes, shard: str, index: int, start: int, end: int) -> RawSample:
        """The raw sample of ``data``, the bytes ``[start, end)`` of ``shard`` read for
        sample ``index`` (checked: read whole, well formed)."""
        if len(data) != end - start:
            raise CorruptShardError(
                f"the shard ended early: expected {end - start} bytes of sample {index}.",
                path=self.store.url(shard),
                offset=start,
                hint="The shard was truncated or replaced; run `stoker lint` on the dataset.",
            )
        if self.jsonl:
            return line_sample(data.strip(), shard, index, start)
        simple = parse_simple(data)
        if simple is not None:
            return RawSample(simple[0], simple[1], shard, index, start)
        return parse_sample(data, self.store.url(shard), shard, index, start)

    def read_run(
        self, shard_ids: Sequence[int], indices: Sequence[int]
    ) -> tuple[list[RawSample], Exception | None]:
        """:meth:`read` of each ``(shard_ids[i], indices[i])`` in order, up to the first that
        fails (and its error): many small samples per call, each read as :meth:`read` would.
        Of remote shards, the run may end sooner, without an error: after the first sample it
        takes only what the read-ahead has received (:meth:`_remote_run`).

        Example: ``read_run([0, 0], [4, 5])`` reads samples 4 and 5 of the first shard.
        """
        out: list[RawSample] = []
        try:
            if not self.local:
                self._remote_run(shard_ids, indices, out)
                return out, None
            if self.jsonl and shard_ids and min(shard_ids) == max(shard_ids):
                done = self._lines(shard_ids[0], indices, out)
                if done == len(indices):
                    return out, None
                shard_ids, indices = shard_ids[done:], indices[done:]
            if self.jsonl:
                append, read = out.append, self.read
                for shard_id, index in zip(shard_ids, indices, strict=True):
                    append(read(shard_id, index))
            else:
                self._members(shard_ids, indices, out)
        except Exception as e:
            return out, e
        return out, None

    def column_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> ColumnRaws | None:
        """The samples ``indices`` of shards ``shard_ids`` read as columns, where the format is
        columnar (:class:`~stoker.pipeline.column_raws.ColumnRaws`); None here: tar samples and
        JSONL lines are read by :meth:`read_run`."""
        return None

    def prefetch(self, shard_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64]) -> None:
        """Hint that these samples are read next, in this order (each read once per hint).

        Local files get coalesced ``posix_fadvise(WILLNEED)`` hints; remote shards are fetched
        ahead in coalesced ranged reads, which :meth:`read` then uses. Indices outside a shard's
        index are left for :meth:`read` to report.
        """
        if len(shard_ids) == 0:
            return
        advise = getattr(os, "posix_fadvise", None)
        # Each shard's hinted samples at once: sorted by shard (stable: in hint order within).
        order = np.argsort(shard_ids, kind="stable")
        cuts = (np.flatnonzero(np.diff(shard_ids[order])) + 1).tolist()
        bounds = list(zip([0, *cuts], [*cuts, len(order)], strict=True))
        unique = shard_ids[order[[lo for lo, _ in bounds]]].tolist()
        self._load_offsets(unique)
        local_ranges: dict[str, tuple[str, list[tuple[int, int]]]] = {}
        remote: list[ShardSamples] = []  # by shard, placed by their place in the hint
        in_order: list[int] | None = None  # the hint's indices by shard, as a list (made once)
        for shard_id, (lo, hi) in zip(unique, bounds, strict=True):
            name = self.shards[shard_id]
            local = self.store.local_path(name)
            offsets = self.offsets(shard_id)
            if local is not None and hi - lo <= _FEW:  # few: plain lists cost less than numpy
                if in_order is None:
                    in_order = indices[order].tolist()
                count = len(offsets) - 1
                few = sorted({i for i in in_order[lo:hi] if 0 <= i < count})
                if count < LIST_WHOLE:
                    spans = offsets.tolist()
                    starts, ends = [spans[i] for i in few], [spans[i + 1] for i in few]
                else:
                    starts = offsets[few].tolist()
                    ends = offsets[[i + 1 for i in few]].tolist()
                local_ranges[name] = (local, coalesce_lists(starts, ends))
                continue
            places = order[lo:hi]
            picked = indices[places]
            keep = (picked >= 0) & (picked < len(offsets) - 1)
            if local is not None:
                picked = sorted_unique(picked[keep])
                local_ranges[name] = (local, coalesce(offsets[picked], offsets[picked + 1]))
                continue
            if keep.any():
                picked = picked[keep]
                edges = offsets.astype(np.int64)  # (uint64 would mix with int64 into floats)
                remote.append(ShardSamples(name, places[keep], edges[picked], edges[picked + 1]))
        if local_ranges:
            self._read_ahead_local(local_ranges, advise)
        if remote:
            self._remote().want_shards(remote)

    def _read_ahead_local(
        self, ranges: dict[str, tuple[str, list[tuple[int, int]]]], advise: Any
    ) -> None:
        """Read small hinted ranges of local shards now (one ``pread`` each); advise the page
        cache of larger ones."""
        total = sum(end - start for _, spans in ranges.values() for start, end in spans)
        if total > HINT_BUDGET:
            for name, (local, spans) in ranges.items():
                if advise is not None:
                    fd = self._fd(name, local)
                    for start, end in spans:
                        advise(fd, start, end - start, os.POSIX_FADV_WILLNEED)
            return
        blocks: dict[str, list[tuple[int, int, bytes]]] = {}
        for name, (local, spans) in ranges.items():
            fd = self._fd(name, local)
            blocks[name] = [(start, end, os.pread(fd, end - start, start)) for start, end in spans]
        self._blocks.add(blocks)

    def _remote(self) -> Prefetcher:
        if self._ahead is None:
            self._ahead = Prefetcher(self.store)
        return self._ahead

    def _load_offsets(self, shard_ids: list[int]) -> None:
        """Read the missing indexes of remote shards ``shard_ids`` concurrently."""
        missing = [s for s in shard_ids if self.shards[s] not in self._offsets]
        if len(missing) < 2 or self.store.local_path(self.shards[missing[0]]) is not None:
            return
        names = [tar_index_name(self.shards[s]) for s in missing]
        indexes = self._remote().map(self.store.read_bytes, names)
        for s, name, data in zip(missing, names, indexes, strict=True):
            self._offsets.remember(self.shards[s], load_offsets(data, self.store.url(name)))

    def close(self) -> None:
        self._blocks.clear()
        for fd in self._fds.values():
            os.close(fd)  # type: ignore[arg-type]
        self._fds.clear()
        if self._ahead is not None:
            self._ahead.close()
