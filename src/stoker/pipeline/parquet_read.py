"""Reading rows of Parquet files by reference: (file, row) -> a raw sample, column -> value.

The reader of :mod:`stoker.format.parquet` datasets, with the interface of
:class:`~stoker.pipeline.read.ShardReader` (``read``, ``read_run``, ``prefetch``, ...). A row is
read through its row group: the group is read once (only the columns asked for), turned into
Python values, and kept in a cache bounded in bytes, so that the next rows of the same group (a
slice reads them in order) cost a list lookup. A media column's struct gives its ``bytes``; the
sample builder decodes them as a tar part of that type.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError
from stoker.format.magic import DEFAULT_MEDIA_EXT
from stoker.format.parquet import ParquetFile
from stoker.pipeline.decode import SampleDecoder, guess_extension
from stoker.pipeline.read import RawSample
from stoker.storage import Store

#: Decoded row groups a reader keeps, in bytes of their Arrow tables.
GROUP_BUDGET = 256 << 20
#: Files a reader keeps open.
_MAX_OPEN = 64


class ParquetReader:
    """Reads rows of Parquet files by (file position, row index)."""

    def __init__(
        self,
        store: Store,
        files: Sequence[str],
        *,
        columns: Sequence[str] | None = None,
        media: dict[str, str] | None = None,
        budget: int = GROUP_BUDGET,
    ) -> None:
        self.store = store
        self.shards = list(files)
        self.columns = None if columns is None else list(columns)
        self.media = dict(media or {})
        self.budget = budget
        self.local = bool(self.shards) and store.local_path(self.shards[0]) is not None
        self._files: OrderedDict[int, ParquetFile] = OrderedDict()
        #: (file, group) -> (a dict per row, weight in bytes of the Arrow table)
        self._groups: OrderedDict[tuple[int, int], tuple[list[dict[str, Any]], int, int]] = (
            OrderedDict()
        )
        self._weight = 0
        #: Per file, the first row of each row group and the row count (a list: bisect).
        self._starts: dict[int, list[int]] = {}
        #: (file, first row, end row, group) of the row group the last read used.
        self._last: tuple[int, int, int, tuple[list[dict[str, Any]], int, int]] | None = None
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

    def _group(self, shard_id: int, group: int) -> tuple[list[dict[str, Any]], int, int]:
        """Row group ``group`` of a file as one dict per row (cached), its weight, and the
        byte offset of its first page (where errors and previews say the row is)."""
        key = (shard_id, group)
        held = self._groups.get(key)
        if held is not None:
            self._groups.move_to_end(key)
            return held
        file = self._file(shard_id)
        table = file.read_group(group, self.columns)
        self.groups_read += 1
        rows: list[dict[str, Any]] = table.to_pylist()
        for name in set(self.media) & set(table.column_names):
            for row in rows:
                value = row[name]
                if isinstance(value, dict) and value.get("bytes") is not None:
                    row[name] = value["bytes"]  # else (a path only) the struct as it is
        held = (rows, int(table.nbytes), file.group_offset(group))
        self._groups[key] = held
        self._weight += held[1]
        while self._weight > self.budget and len(self._groups) > 1:
            self._weight -= self._groups.popitem(last=False)[1][1]
        return held

    def read(self, shard_id: int, index: int) -> RawSample:
        """The columns of row ``index`` of file ``shard_id``."""
        last = self._last
        if last is not None and last[0] == shard_id and last[1] <= index < last[2]:
            held, first = last[3], last[1]  # the row group of the previous row (a slice's run)
        else:
            starts = self._starts.get(shard_id)
            if starts is None:
                starts = self._starts[shard_id] = self._file(shard_id).group_starts.tolist()
            if not 0 <= index < starts[-1]:
                raise FormatError(
                    f"row {index} is outside the file's {starts[-1]} rows.",
                    path=self.store.url(self.shards[shard_id]),
                    hint="The file changed since the loader was set up; start it again.",
                )
            group = bisect.bisect_right(starts, index) - 1
            held, first = self._group(shard_id, group), starts[group]
            self._last = (shard_id, first, starts[group + 1], held)
        parts = held[0][index - first]  # decode_row copies it before changing it
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

    def line_run(self, shard_ids: Sequence[int], indices: Sequence[int]) -> None:
        return None  # rows are not JSONL lines

    def prefetch(self, shard_ids: npt.NDArray[np.int64], indices: npt.NDArray[np.int64]) -> None:
        """Nothing ahead: a row group is read whole when its first row is."""

    def close(self) -> None:
        for opened in self._files.values():
            opened.close()
        self._files.clear()
        self._groups.clear()
        self._starts.clear()
        self._last = None
        self._weight = 0


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
