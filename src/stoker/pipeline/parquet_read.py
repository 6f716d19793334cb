"""Reading rows of Parquet files by reference: (file, row) -> a raw sample, column -> value.

The reader of :mod:`stoker.format.parquet` datasets, with the interface of
:class:`~stoker.pipeline.read.ShardReader` (``read``, ``read_run``, ``prefetch``, ...). A row is
read through its row group: the group is read once (only the columns asked for) as an Arrow
table, and its rows are turned into Python values :data:`CHUNK_ROWS` at a time (one list per
column), the chunk holding the row first. The table is let go once all its chunks are made, a
chunk once all its rows were read (an epoch reads each row once). Tables and chunks are kept in
one cache bounded in bytes, so that the next rows of a chunk (a slice reads them in order) cost
a list lookup, and a shuffle buffer's slices, each in another row group, cost a chunk each to
start, not a group. A run of rows is read as columns (:meth:`ParquetReader.column_run`),
gathered from the chunks' columns. A media column's struct gives its ``bytes``; the sample
builder decodes them as a tar part of that type.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError
from stoker.format.magic import DEFAULT_MEDIA_EXT
from stoker.format.parquet import ParquetFile
from stoker.pipeline.column_raws import ColumnRaws, member_names
from stoker.pipeline.decode import SampleDecoder, guess_extension
from stoker.pipeline.read import RawSample
from stoker.storage import Store
from stoker.storage.options import current

#: Rows of a row group turned into Python values at a time.
CHUNK_ROWS = 256
#: Files a reader keeps open.
_MAX_OPEN = 64
#: A chunk of rows: its values per column, its first row in the file, and the byte offset of
#: its row group's first page (where errors and previews say its rows are).
_Chunk = tuple[dict[str, list[Any]], int, int]


class ParquetReader:
    """Reads rows of Parquet files by (file position, row index)."""

    def __init__(
        self,
        store: Store,
        files: Sequence[str],
        *,
        columns: Sequence[str] | None = None,
        media: dict[str, str] | None = None,
        budget: int | None = None,
    ) -> None:
        self.store = store
        self.shards = list(files)
        self.columns = None if columns is None else list(columns)
        self.media = dict(media or {})
        #: Bytes of row groups (Arrow tables) and chunks of rows made values it keeps (a chunk
        #: weighs what its rows weigh in Arrow); None: ``LoaderOptions.row_group_cache_bytes``.
        self.budget = current().row_group_cache_bytes if budget is None else budget
        self.local = bool(self.shards) and store.local_path(self.shards[0]) is not None
        self._files: OrderedDict[int, ParquetFile] = OrderedDict()
        #: ("table", file, group) -> (Arrow table, offset); ("chunk", file, chunk) -> _Chunk;
        #: each with its weight, least recently used first.
        self._cache: OrderedDict[tuple[str, int, int], tuple[Any, int]] = OrderedDict()
        self._weight = 0
        #: Per file, the first row of each chunk and the row count (a list: bisect), and each
        #: chunk's row group and first row in it.
        self._starts: dict[int, list[int]] = {}
        self._places: dict[int, list[tuple[int, int]]] = {}
        #: (file, group) -> chunks made from its table since it was read (when all are, the
        #: table is let go: its rows are values now).
        self._made: dict[tuple[int, int], int] = {}
        #: (file, first row, end row, values, number) of the chunk the last read used.
        self._last: tuple[int, int, int, _Chunk, int] | None = None
        #: (file, chunk) -> its rows read so far (see :meth:`_taken`).
        self._read_rows: dict[tuple[int, int], int] = {}
        #: Row groups read from the files (for tests and stats).
        self.groups_read = 0

    def _file(self, shard_id: int) -> ParquetFile:
        opened = self._files.get(shard_id)
        if opened is None:
            opened = self._files[shard_id] = ParquetFile(self.store, self.shards[shard_id])
            if len(self._files) > _MAX_OPEN:
                self._files.popitem(last=False)[1].close()
        else:
            self._files.move_to_end(shard_id)
        return opened

    def offsets(self, shard_id: int) -> npt.NDArray[np.int64]:
        """The first row of each row group of a file, then its row count."""
        return self._file(shard_id).group_starts

    def _chunk_starts(self, shard_id: int) -> list[int]:
        """The first row of each chunk of a file, then its row count (its chunks laid out)."""
        starts = self._starts.get(shard_id)
        if starts is None:
            groups = self._file(shard_id).group_starts.tolist()
            starts, places = [], []
            for group, (first, end) in enumerate(pairwise(groups)):
                for row in range(first, end, CHUNK_ROWS):
                    starts.append(row)
                    places.append((group, row - first))
            starts.append(groups[-1])
            self._starts[shard_id], self._places[shard_id] = starts, places
        return starts

    def _held(self, key: tuple[str, int, int]) -> Any:
        held = self._cache.get(key)
        if held is None:
            return None
        self._cache.move_to_end(key)
        return held[0]

    def _keep(self, key: tuple[str, int, int], value: Any, weight: int) -> None:
        self._cache[key] = (value, weight)
        self._weight += weight
        while self._weight > self.budget and len(self._cache) > 1:
            self._weight -= self._cache.popitem(last=False)[1][1]

    def _chunk(self, shard_id: int, chunk: int) -> _Chunk:
        """Chunk ``chunk`` of a file's rows as one list of values per column (cached)."""
        key = ("chunk", shard_id, chunk)
        held: _Chunk | None = self._held(key)
        if held is not None:
            return held
        starts = self._starts[shard_id]
        group, at = self._places[shard_id][chunk]
        table, offset = self._table(shard_id, group)
        rows = table.slice(at, starts[chunk + 1] - starts[chunk])
        columns: dict[str, list[Any]] = rows.to_pydict()
        for name in set(self.media) & set(columns):
            columns[name] = [_media_bytes(value) for value in columns[name]]
        held = (columns, starts[chunk], offset)
        self._keep(key, held, int(rows.nbytes))
        made = self._made.get((shard_id, group), 0) + 1
        if made == self._chunks_in(shard_id, group):  # all its rows are values: the table goes
            dropped = self._cache.pop(("table", shard_id, group), None)
            self._weight -= 0 if dropped is None else dropped[1]
            made = 0
        self._made[shard_id, group] = made
        return held

    def _taken(self, shard_id: int, chunk: int, rows: int) -> None:
        """Note that ``rows`` rows of a chunk were read; once all its rows were, it is let go
        (an epoch reads each row once: a read chunk only holds memory)."""
        key = (shard_id, chunk)
        taken = self._read_rows.get(key, 0) + rows
        starts = self._starts[shard_id]
        if taken < starts[chunk + 1] - starts[chunk]:
            self._read_rows[key] = taken
            return
        self._read_rows.pop(key, None)
        dropped = self._cache.pop(("chunk", shard_id, chunk), None)
        self._weight -= 0 if dropped is None else dropped[1]

    def _chunks_in(self, shard_id: int, group: int) -> int:
        """How many chunks row group ``group`` of a file has."""
        starts = self._file(shard_id).group_starts
        return -(-int(starts[group + 1] - starts[group]) // CHUNK_ROWS)

    def _table(self, shard_id: int, group: int) -> tuple[Any, int]:
        """Row group ``group`` of a file as an Arrow table (cached), and the byte offset of its
        first page."""
        key = ("table", shard_id, group)
        held: tuple[Any, int] | None = self._held(key)
        if held is None:
            file = self._file(shard_id)
            table = file.read_group(group, self.columns)
            self.groups_read += 1
            held = (table, file.group_offset(group))
            self._keep(key, held, int(table.nbytes))
            self._made[shard_id, group] = 0
        return held

    def _row(self, shard_id: int, index: int) -> tuple[_Chunk, int]:
        """The chunk holding row ``index`` of file ``shard_id``, and the row's place in it (the
        row counted as read)."""
        last = self._last
        if last is not None and last[0] == shard_id and last[1] <= index < last[2]:
            self._taken(shard_id, last[4], 1)
            return last[3], index - last[1]  # the chunk of the previous row (a slice's run)
        starts = self._chunk_starts(shard_id)
        if not 0 <= index < starts[-1]:
            raise FormatError(
                f"row {index} is outside the file's {starts[-1]} rows.",
                path=self.store.url(self.shards[shard_id]),
                hint="The file changed since the loader was set up; start it again.",
            )
        chunk = bisect.bisect_right(starts, index) - 1
        held = self._chunk(shard_id, chunk)
        self._last = (shard_id, starts[chunk], starts[chunk + 1], held, chunk)
        self._taken(shard_id, chunk, 1)
        return held, index - starts[chunk]

    def read(self, shard_id: int, index: int) -> RawSample:
        """The columns of row ``index`` of file ``shard_id``."""
        held, at = self._row(shard_id, index)
        parts = {name: values[at] for name, values in held[0].items()}
        name = self.shards[shard_id]
        return RawSample(f"{name}/{index}", parts, name, index, held[2])

    def read_run(
        self, shard_ids: Sequence[int], indices: Sequence[int]
    ) -> tuple[list[RawSample], Exception | None]:
        """:meth:`read` of each ``(shard_ids[i], indices[i])``, up to the first that fails."""
        out: list[RawSample] = []
        try:
            for shard_id, index in zip(shard_ids, indices, strict=True):
                out.append(self.read(shard_id, index))
        except Exception as e:
            return out, e
        return out, None

    def column_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> ColumnRaws | None:
        """Rows ``indices`` of files ``shard_ids`` as columns, each gathered from the chunks'
        columns in one loop; None (the rows are left to :meth:`read_run`, which reports the
        one that fails) where a row cannot be read."""
        starts_of = self._starts
        found: dict[tuple[int, int], list[Any]] = {}  # chunk -> [its values, rows read]
        chunks: list[dict[str, list[Any]]] = []
        places: list[int] = []
        offsets: list[int] = []
        try:
            for shard_id, index in zip(shard_ids, indices, strict=True):
                starts = starts_of.get(shard_id) or self._chunk_starts(shard_id)
                chunk = bisect.bisect_right(starts, index) - 1
                entry = found.get((shard_id, chunk))
                if entry is None:  # the run's first row of this chunk
                    if not 0 <= index < starts[-1]:
                        return None
                    entry = found[shard_id, chunk] = [self._chunk(shard_id, chunk), 0]
                entry[1] += 1
                held = entry[0]
                chunks.append(held[0])
                places.append(index - held[1])
                offsets.append(held[2])
        except Exception:
            return None
        for (shard_id, chunk), (_, rows) in found.items():
            self._taken(shard_id, chunk, rows)
        if not chunks:
            return None
        names = list(chunks[0])  # every file has the same columns (checked when opened)
        fields = {
            name: [columns[name][at] for columns, at in zip(chunks, places, strict=True)]
            for name in names
        }
        files = self.shards
        shards = [files[shard_id] for shard_id in shard_ids]
        keys = [f"{shard}/{index}" for shard, index in zip(shards, indices, strict=True)]
        return ColumnRaws(fields, keys, indices, offsets, shards, member_names(keys, names))

    def line_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> None:
        return None  # rows are not JSONL lines

    def prefetch(self, shard_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64]) -> None:
        """Nothing ahead: a row group is read whole when its first row is."""

    def close(self) -> None:
        for opened in self._files.values():
            opened.close()
        self._files.clear()
        self._cache.clear()
        self._starts.clear()
        self._places.clear()
        self._made.clear()
        self._read_rows.clear()
        self._last = None
        self._weight = 0


def _media_bytes(value: Any) -> Any:
    """A media column's value: its struct's ``bytes`` (else, a path only, the struct)."""
    if isinstance(value, dict) and value.get("bytes") is not None:
        return value["bytes"]
    return value


def decode_row(
    decoder: SampleDecoder | None, key: str, parts: dict[str, Any], media: dict[str, str]
) -> dict[str, Any]:
    """A row's values as a sample's fields: media columns' bytes decoded by ``decoder`` as a
    tar part of their type (``image.jpg``, by their magic number), other columns as they are.

    Example:
        >>> decode_row(SampleDecoder(), "r/0", {"text": "a cat", "n": 3}, {})
        {'text': 'a cat', 'n': 3}
    """
    out = dict(parts)
    if decoder is None:
        return out
    for name, kind in media.items():
        data = out.get(name)
        if isinstance(data, bytes):
            ext = guess_extension(data) or DEFAULT_MEDIA_EXT.get(kind, kind)
            out[name] = decoder.decode_part(key, f"{name}.{ext}", data)
    return out
