"""Reading sequences of Megatron token datasets (``.bin`` + ``.idx``) by reference.

:class:`BinIdxReader` is a :class:`~stoker.pipeline.read.ShardReader` whose shards are ``.bin``
files: sample ``i`` of a shard is sequence ``i`` of its index, a raw sample with one part,
``tokens``, the sequence as an array of the index's dtype (its own copy: nothing keeps the file's
pages). A local ``.bin`` is memory-mapped; of a remote one, exactly each sequence's bytes are
read, ahead of time in coalesced ranged reads on the read-ahead the plan drives, as for tar
shards. A remote ``.idx`` is kept in the local metadata cache, as a remote JSONL index is.

Example:
    >>> from stoker.storage import open_store
    >>> reader = BinIdxReader(open_store("."), ["corpus_text_document.bin"])
    >>> reader.read(0, 5).parts["tokens"][:4]
    array([11263,  9307, 12689, 14575], dtype=int32)
"""

from __future__ import annotations

import contextlib
import mmap
from collections.abc import Sequence
from itertools import accumulate
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import CorruptShardError, FormatError, StorageError
from stoker.format.binidx import TokenIndex, idx_name
from stoker.pipeline.column_raws import ColumnRaws, member_names
from stoker.pipeline.prefetch import ShardSamples
from stoker.pipeline.read import LineRaws, RawSample, ShardReader
from stoker.storage import Store

_new_tuple = tuple.__new__


class BinIdxReader(ShardReader):
    """Reads sequences of ``.bin`` files (``shards``) of ``store`` by (file position, index)."""

    def __init__(self, store: Store, shards: Sequence[str]) -> None:
        super().__init__(store, shards)
        self._indexes: dict[int, TokenIndex] = {}
        self._maps: dict[int, mmap.mmap | None] = {}
        #: Per file, whether its index's sequences all lie whole in the mapped file.
        self._whole: dict[int, bool] = {}

    def index(self, shard_id: int) -> TokenIndex:
        """The index of ``.bin`` file ``shard_id`` (mapped once; a remote one cached locally)."""
        found = self._indexes.get(shard_id)
        if found is None:
            name = idx_name(self.shards[shard_id])
            url = self.store.url(name)
            local = self.store.local_path(name) or self.store.cached_local_path(name)
            if local is None:
                raise StorageError(
                    "the .idx beside the .bin is missing.",
                    path=url,
                    hint="Copy the .idx next to its .bin (megatron-core writes both).",
                )
            try:
                found = self._indexes[shard_id] = TokenIndex.load(local, url)
            except FileNotFoundError:
                raise StorageError(
                    "the .idx was deleted or moved.", path=url, hint="Restore the .idx."
                ) from None
        return found

    def _map(self, shard_id: int) -> mmap.mmap | None:
        """The memory map of a local ``.bin`` (None: remote, or empty)."""
        if shard_id not in self._maps:
            name = self.shards[shard_id]
            local = self.store.local_path(name)
            mapped = None
            if local is not None:
                fd = self._fd(name, local)
                if self.store.size(name) > 0:
                    mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            self._maps[shard_id] = mapped
        return self._maps[shard_id]

    def byte_range(self, shard_id: int, index: int) -> tuple[int, int]:
        found = self.index(shard_id)
        if not 0 <= index < len(found):
            raise FormatError(
                f"sequence {index} is outside the index ({len(found)} sequences).",
                path=self.store.url(idx_name(self.shards[shard_id])),
                hint="The dataset changed since the loader's state was saved.",
            )
        start = int(found.pointers[index])
        return start, start + int(found.lengths[index]) * found.dtype.itemsize

    def read(self, shard_id: int, index: int) -> RawSample:
        """Sequence ``index`` of ``.bin`` file ``shard_id``."""
        start, end = self.byte_range(shard_id, index)
        dtype = self._indexes[shard_id].dtype
        mapped = self._map(shard_id) if self.local else None
        shard = self.shards[shard_id]
        if mapped is not None and end <= len(mapped):
            tokens = np.frombuffer(mapped, dtype, (end - start) // dtype.itemsize, start).copy()
        else:
            data = self._read(shard_id, start, end) if end > start else b""
            if len(data) != end - start:
                raise CorruptShardError(
                    f"the .bin ended early: sequence {index} needs bytes [{start}, {end}).",
                    path=self.store.url(shard),
                    offset=start,
                    hint="The .bin was truncated or does not match its .idx; run `stoker lint`.",
                )
            tokens = np.frombuffer(data, dtype).copy()
        return _new_tuple(RawSample, (str(index), {"tokens": tokens}, shard, index, start))

    def read_run(
        self, shard_ids: Sequence[int], indices: Sequence[int]
    ) -> tuple[list[RawSample], Exception | None]:
        """:meth:`read` of each reference in order, up to the first that fails (and its
        error); of a remote file, after the first only those the read-ahead holds already."""
        out: list[RawSample] = []
        try:
            if self.local:
                run = self.column_run(shard_ids, indices)
                if run is not None:
                    return list(run), None
                read, append = self.read, out.append
                for shard_id, index in zip(shard_ids, indices, strict=True):
                    append(read(shard_id, index))
            elif shard_ids:
                out.append(self.read(shard_ids[0], indices[0]))
                self._held(shard_ids[1:], indices[1:], out)
        except Exception as e:
            return out, e
        return out, None

    def column_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> ColumnRaws | None:
        """Sequences ``indices`` of one mapped local file in one go, as the column ``tokens``:
        their tokens gathered into one new array, each sequence a view of its part; None
        (nothing read) where that does not apply (remote, several files, an index or byte
        outside): :meth:`read` then reads and reports each."""
        if not shard_ids or not self.local or min(shard_ids) != max(shard_ids):
            return None
        shard_id = shard_ids[0]
        index, mapped = self.index(shard_id), self._map(shard_id)
        size = index.dtype.itemsize
        if mapped is None or len(mapped) % size or min(indices) < 0 or max(indices) >= len(index):
            return None
        starts = index.pointers[indices]
        lengths = index.lengths[indices]
        if not self._mapped_whole(shard_id, index, mapped):  # check this run's sequences
            ends = starts + lengths.astype(np.int64) * size
            if (
                (starts % size).any()
                or int(ends.max()) > len(mapped)
                or min(int(lengths.min()), int(starts.min())) < 0
            ):
                return None
        counts = lengths.tolist()
        tokens = np.frombuffer(mapped, index.dtype)
        first = (starts // size).tolist()
        gathered = np.concatenate([tokens[a : a + n] for a, n in zip(first, counts, strict=True)])
        cuts = list(accumulate(counts))
        views = [gathered[a:b] for a, b in zip([0, *cuts], cuts, strict=False)]
        keys = list(map(str, indices))
        shards = [self.shards[shard_id]] * len(keys)
        names = member_names(keys, ("tokens",))
        return ColumnRaws({"tokens": views}, keys, indices, starts.tolist(), shards, names)

    def _mapped_whole(self, shard_id: int, index: TokenIndex, mapped: mmap.mmap) -> bool:
        """Whether every sequence of the index lies whole in the mapped file, at a multiple of
        the dtype's size (checked once per file; where not, each run's sequences are checked,
        and :meth:`read` reports the bad ones)."""
        whole = self._whole.get(shard_id)
        if whole is None:
            size = index.dtype.itemsize
            starts, lengths = index.pointers, index.lengths.astype(np.int64)
            whole = self._whole[shard_id] = bool(
                (len(index) == 0 or min(int(lengths.min()), int(starts.min())) >= 0)
                and not (starts % size).any()
                and (len(index) == 0 or int((starts + lengths * size).max()) <= len(mapped))
            )
        return whole

    def _held(self, shard_ids: Sequence[int], indices: Sequence[int], out: list[RawSample]) -> None:
        """The remote sequences whose bytes the read-ahead received, up to the first not."""
        if self._ahead is None or not shard_ids:
            return
        wanted: list[tuple[str, int, int]] = []
        for shard_id, index in zip(shard_ids, indices, strict=True):
            found = self._indexes.get(shard_id)
            if found is None or not 0 <= index < len(found):
                break
            wanted.append((self.shards[shard_id], *self.byte_range(shard_id, index)))
        held = self._ahead.take_held(wanted)
        for (shard, start, _), index, shard_id, data in zip(
            wanted, indices, shard_ids, held, strict=False
        ):
            dtype = self._indexes[shard_id].dtype
            out.append(
                _new_tuple(
                    RawSample,
                    (
                        str(index),
                        {"tokens": np.frombuffer(data, dtype).copy()},
                        shard,
                        index,
                        start,
                    ),
                )
            )

    def line_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> LineRaws | None:
        return None  # no JSONL lines here

    def prefetch(self, shard_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64]) -> None:
        """Remote files: fetch the sequences read next in coalesced ranged reads (local ones
        are mapped: the kernel reads ahead)."""
        if len(shard_ids) == 0 or self.local:
            return
        wanted: list[ShardSamples] = []
        for shard_id in np.unique(shard_ids).tolist():
            places = np.flatnonzero(shard_ids == shard_id)
            found = self.index(shard_id)
            picked = indices[places]
            keep = (picked >= 0) & (picked < len(found))
            starts, ends = found.byte_ranges(picked[keep])
            nonempty = ends > starts
            wanted.append(
                ShardSamples(
                    self.shards[shard_id], places[keep][nonempty], starts[nonempty], ends[nonempty]
                )
            )
        self._remote().want_shards(wanted)

    def close(self) -> None:
        for mapped in self._maps.values():
            if mapped is not None:
                _close_map(mapped)
        self._maps.clear()
        self._indexes.clear()
        self._whole.clear()
        super().close()


def _close_map(mapped: Any) -> None:
    # BufferError: an array still views it; the map goes when that array does.
    with contextlib.suppress(BufferError):
        mapped.close()
