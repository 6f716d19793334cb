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
from itertools import repeat
from typing import Any, NamedTuple, overload
from zlib import adler32

import numpy as np
import numpy.typing as npt

from stoker.errors import CorruptShardError, FormatError, StorageError
from stoker.format.tar import (
    BLOCK,
    SKIP_META_RE,
    SPLIT_NAME_RE,
    TarScan,
    checksum_ok,
    split_name,
)
from stoker.format.tar_index import load_offsets, local_offsets, tar_index_name
from stoker.pipeline.local_blocks import HINT_BUDGET, LocalBlocks
from stoker.pipeline.prefetch import Prefetcher, ShardSamples
from stoker.storage import Store

_MAX_OPEN = 256
_COALESCE_GAP = 1 << 16
#: A shard's hinted samples up to this many are looked up in plain lists (numpy beyond).
_FEW = 32
#: A shard index of up to this many offsets is made a list whole to look up a few samples in it
#: (cheaper than numpy for small shards); of a larger one, just the offsets needed are taken
#: (listing 10^4 offsets costs ~0.1 ms, and a run or hint may use a handful of them).
_LIST_WHOLE = 1024
#: Local index files of at least this many bytes (32k samples) are memory-mapped, not read:
#: the processes that read one share its pages, which the kernel may drop and read again.
_MAP_BYTES = 1 << 18
#: Shard indexes read into memory that a reader keeps, in bytes (mapped ones weigh nothing):
#: ~400 shards of 10^4 samples. Without a bound, a worker that visits thousands of large
#: shards over a long run would keep all their indexes.
_OFFSETS_BYTES = 32 << 20
#: Shard indexes a reader keeps at most (read or mapped).
_OFFSETS_COUNT = 4096


class RawSample(NamedTuple):
    """The undecoded parts of one sample and where they came from (a named tuple: one is made
    per sample)."""

    key: str
    parts: dict[str, bytes]
    shard: str
    index: int  # type: ignore[assignment]  # the field hides tuple.index, as intended
    offset: int

    @property
    def file_names(self) -> tuple[str, ...]:
        key = self.key
        return tuple([f"{key}.{part}" for part in self.parts])


#: ``RawSample(...)`` without its Python-level ``__new__`` (a named tuple's), for many samples.
_new_tuple = tuple.__new__


def _held_lines(
    held: list[tuple[int, int, bytes]],
    first: npt.NDArray[np.int64],
    last: npt.NDArray[np.int64],
    indices: Sequence[int],
    shard: str,
    out: list[RawSample],
) -> None:
    """The raw samples of JSONL lines ``indices`` (bytes ``first[i]`` to ``last[i]`` of the
    file, each held whole in read-ahead block ``held[i]``) onto ``out``: as
    :meth:`ShardReader._lines` makes them one by one, with the per-line work in C loops."""
    lines, starts = _cut_lines(held, first, last)
    parts = [{"json": line} for line in lines]
    # repeat() has no end: the lists (of one length) end the zip.
    fields = zip(map(str, indices), parts, repeat(shard), indices, starts, strict=False)
    out.extend(map(_new_tuple, repeat(RawSample), fields))


def _cut_lines(
    held: list[tuple[int, int, bytes]], first: npt.NDArray[np.int64], last: npt.NDArray[np.int64]
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


class LineRaws(Sequence[RawSample]):
    """The raw samples of JSONL lines cut in one go (:meth:`ShardReader.line_run`), each made
    only when asked for (as :meth:`ShardReader.read` makes it): a run's raw samples serve
    only to report a failure or to go one by one, rarely."""

    __slots__ = ("indices", "lines", "shard", "starts")

    def __init__(
        self, lines: list[bytes], indices: Sequence[int], starts: list[int], shard: str
    ) -> None:
        self.lines, self.indices, self.starts, self.shard = lines, indices, starts, shard

    def __len__(self) -> int:
        return len(self.lines)

    @overload
    def __getitem__(self, at: int) -> RawSample: ...

    @overload
    def __getitem__(self, at: slice) -> Sequence[RawSample]: ...

    def __getitem__(self, at: int | slice) -> RawSample | Sequence[RawSample]:
        if isinstance(at, slice):
            return [self[i] for i in range(*at.indices(len(self.lines)))]
        index = self.indices[at]
        return RawSample(str(index), {"json": self.lines[at]}, self.shard, index, self.starts[at])


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


class ShardReader:
    """Reads samples of tar shards (or lines of JSONL files) by (shard position, index)."""

    def __init__(self, store: Store, shards: Sequence[str], *, jsonl: bool = False) -> None:
        self.store = store
        self.shards = list(shards)
        self.jsonl = jsonl
        self._offsets = _OffsetsCache()
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
            return RawSample(str(index), {"json": data.strip()}, shard, index, start)
        simple = _parse_simple(data)
        if simple is not None:
            return RawSample(simple[0], simple[1], shard, index, start)
        return _parse_sample(data, self.store.url(shard), shard, index, start)

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

    def _members(
        self, shard_ids: Sequence[int], indices: Sequence[int], out: list[RawSample]
    ) -> None:
        """Read tar samples into ``out``: plain ones held in read-ahead blocks in this loop,
        others by :meth:`read` (which reads and reports as for one)."""
        shards, cached, take = self.shards, self._offsets, self._blocks.take
        append, read = out.append, self.read
        # the offsets of this run's shards: lists of small indexes, else numpy (_LIST_WHOLE)
        listed: dict[str, Any] = {}
        for shard_id, index in zip(shard_ids, indices, strict=True):
            shard = shards[shard_id]
            spans = listed.get(shard)
            if spans is None:
                offsets: Any = cached.get(shard)
                if offsets is not None:
                    whole = len(offsets) <= _LIST_WHOLE
                    spans = listed[shard] = offsets.tolist() if whole else offsets
            if spans is not None and 0 <= index < len(spans) - 1:
                if type(spans) is list:
                    start, end = spans[index], spans[index + 1]
                else:
                    start, end = spans[index : index + 2].tolist()
                data = take(shard, start, end)
                if data is not None and len(data) == end - start:
                    simple = _parse_simple(data)
                    if simple is not None:
                        append(_new_tuple(RawSample, (simple[0], simple[1], shard, index, start)))
                        continue
            append(read(shard_id, index))

    def line_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> LineRaws | None:
        """The JSONL lines ``indices`` of one file, cut in one go, where :meth:`read_run` would
        read them all from read-ahead blocks (None otherwise: :meth:`read_run` then reads them,
        or reports what fails)."""
        if not self.jsonl or not shard_ids or min(shard_ids) != max(shard_ids):
            return None
        shard = self.shards[shard_ids[0]]
        offsets = self._offsets.get(shard)
        if offsets is None:
            return None
        picked = np.asarray(indices, dtype=np.int64)
        count = len(offsets) - 1
        if len(picked) == 0 or int(picked.min()) < 0 or int(picked.max()) >= count:
            return None
        first = offsets[picked].astype(np.int64)
        last = offsets[picked + 1].astype(np.int64)
        held = self._blocks.locate(shard, first, last)
        if None in held:
            return None
        lines, starts = _cut_lines(held, first, last)  # type: ignore[arg-type]
        return LineRaws(lines, indices, starts, shard)

    def _lines(self, shard_id: int, indices: Sequence[int], out: list[RawSample]) -> int:
        """Read JSONL lines ``indices`` of one file into ``out`` while they are in its index and
        read whole (else :meth:`read` takes over and reports); how many were read."""
        shard = self.shards[shard_id]
        offsets = self._offsets.get(shard)
        if offsets is None:
            offsets = self.offsets(shard_id)
        picked = np.asarray(indices, dtype=np.int64)
        count = len(offsets) - 1
        if len(picked) == 0 or int(picked.min()) < 0 or int(picked.max()) >= count:
            return 0
        first = offsets[picked].astype(np.int64)
        last = offsets[picked + 1].astype(np.int64)
        held = self._blocks.locate(shard, first, last)
        if None not in held:  # all read ahead: cut in one go
            _held_lines(held, first, last, indices, shard, out)  # type: ignore[arg-type]
            return len(held)
        read, append = self._read, out.append
        done = 0
        for index, start, end, block in zip(
            indices, first.tolist(), last.tolist(), held, strict=True
        ):
            if block is None:
                data = read(shard_id, start, end)
            else:
                data = block[2][start - block[0] : end - block[0]]
            if len(data) != end - start:
                break
            append(_new_tuple(RawSample, (str(index), {"json": data.strip()}, shard, index, start)))
            done += 1
        return done

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
                if count < _LIST_WHOLE:
                    spans = offsets.tolist()
                    starts, ends = [spans[i] for i in few], [spans[i + 1] for i in few]
                else:
                    starts = offsets[few].tolist()
                    ends = offsets[[i + 1 for i in few]].tolist()
                local_ranges[name] = (local, _coalesce_lists(starts, ends))
                continue
            places = order[lo:hi]
            picked = indices[places]
            keep = (picked >= 0) & (picked < len(offsets) - 1)
            if local is not None:
                picked = sorted_unique(picked[keep])
                local_ranges[name] = (local, _coalesce(offsets[picked], offsets[picked + 1]))
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


def sorted_unique(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``np.unique(values)`` of a 1-D integer array (each value once, ascending), by a sort:
    numpy's hash-based ``unique`` cost ~7x more on a block's few thousand sample indices.

    Example:
        >>> sorted_unique(np.array([5, 1, 5, 3, 1])).tolist()
        [1, 3, 5]
    """
    out = np.sort(values)
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def _coalesce(
    starts: npt.NDArray[np.uint64], ends: npt.NDArray[np.uint64]
) -> list[tuple[int, int]]:
    """Merge sorted byte ranges that are closer than ``_COALESCE_GAP``.

    Example:
        >>> starts = np.array([0, 10, 1 << 20], np.uint64)
        >>> _coalesce(starts, starts + np.array([10, 10, 5], np.uint64))
        [(0, 20), (1048576, 1048581)]
    """
    if len(starts) < 64:  # few: a plain loop costs less than numpy's calls
        return _coalesce_lists(starts.tolist(), ends.tolist())
    first = starts.astype(np.int64)
    last = np.maximum.accumulate(ends.astype(np.int64))  # the end of everything so far
    # A range starts where the gap after everything before it is wider than _COALESCE_GAP.
    cut = np.flatnonzero(first[1:] - last[:-1] > _COALESCE_GAP) + 1
    begins = np.concatenate(([0], cut))
    finals = np.concatenate((cut - 1, [len(first) - 1]))
    return list(zip(first[begins].tolist(), last[finals].tolist(), strict=True))


def _coalesce_lists(starts: list[int], ends: list[int]) -> list[tuple[int, int]]:
    """:func:`_coalesce` of a few ranges given as lists, in a plain loop.

    Example:
        >>> _coalesce_lists([0, 10, 1 << 20], [10, 20, (1 << 20) + 5])
        [(0, 20), (1048576, 1048581)]
    """
    ranges: list[tuple[int, int]] = []
    for start, end in zip(starts, ends, strict=True):
        if ranges and start - ranges[-1][1] <= _COALESCE_GAP:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((start, end))
    return ranges


#: split_name's two patterns (read once per tar member of a small sample).
_skip_meta, _split_match = SKIP_META_RE.match, SPLIT_NAME_RE.match

#: Header type flags of regular files (``0``, NUL for old tars, ``7``).
_REGULAR = frozenset(b"0\x007")


def _parse_simple(data: bytes) -> tuple[str, dict[str, bytes]] | None:
    """The key and parts of a sample that is only plain members (regular files with names of
    up to 100 bytes, sizes in octal, valid checksums, one key, no pax or long-name headers, no
    meta members), the common case, in one pass; None for anything else (:func:`_parse_sample`
    reads it then, and reports what is wrong).

    Example:
        >>> import io, tarfile
        >>> out = io.BytesIO()
        >>> with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        ...     info = tarfile.TarInfo("k1.txt"); info.size = 2
        ...     tar.addfile(info, io.BytesIO(b"hi"))
        >>> _parse_simple(out.getvalue()[:1024])
        ('k1', {'txt': b'hi'})
    """
    key: str | None = None
    parts: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        header = data[pos : pos + BLOCK]
        if len(header) < BLOCK or header[156] not in _REGULAR or header[124] & 0x80:
            return None
        if header[345] and header[257:262] == b"ustar":  # a name prefix: the full reader
            return None
        # checksum_ok, inline for its common case (the unsigned sum; it decides the others)
        stored = header[148:156]
        try:
            unsigned = int(stored.split(b"\0", 1)[0].strip(), 8) == (
                (adler32(header[:256]) & 0xFFFF) + (adler32(header[256:]) & 0xFFFF)
                - 2 - sum(stored) + 256
            )  # fmt: skip
        except ValueError:
            return None
        if not unsigned and not checksum_ok(header):
            return None
        try:
            size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        except ValueError:
            return None
        # split_name, inline
        name = header[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        match = None if _skip_meta(name) else _split_match(name)
        if match is None:
            return None
        split = match.groups()
        if split[1] in parts or (key is not None and split[0] != key):
            return None
        key = split[0]
        start = pos + BLOCK
        if start + size > end:
            return None
        parts[split[1]] = data[start : start + size]
        pos = start + (size + BLOCK - 1) // BLOCK * BLOCK
    return None if key is None else (key, parts)


def _parse_sample(data: bytes, where: str, shard: str, index: int, offset: int) -> RawSample:
    key: str | None = None
    parts: dict[str, bytes] = {}
    scan = TarScan(lambda off, n: data[off : off + n], len(data), where)
    try:
        for member in scan:
            split = split_name(member.name)
            if split is None:
                continue
            if key is None:
                key = split[0]
            elif split[0] != key:
                break
            if split[1] in parts:  # WebDataset raises too: the second copy would hide the first
                raise FormatError(
                    f"part {split[1]!r} occurs twice in sample {index} of the shard.",
                    path=where,
                    key=key,
                    offset=member.offset,
                    hint="Each file of a sample needs its own name; re-shard the data with "
                    "`stoker pack` and prepare it again.",
                )
            parts[split[1]] = data[member.data_offset : member.data_offset + member.size]
    except FormatError as e:
        raise FormatError(
            e.problem, path=where, key=e.key, offset=offset + (e.offset or 0), hint=e.hint
        ) from None
    if key is None:
        raise CorruptShardError(
            f"sample {index} has no members at the indexed offset.",
            path=where,
            offset=offset,
            hint="The .tar.idx does not match the shard; run `stoker prepare --tar-index-only`.",
        )
    return RawSample(key, parts, shard, index, offset)
