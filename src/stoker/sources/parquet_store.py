"""A Parquet dataset as a file store: ``"row.column"`` gives one value of one row.

The row is numbered over the split's files in path order (as the dataset numbers its samples);
``"row"`` alone gives the whole row (column -> value). A ``part_filter`` keeps only the columns
it accepts, so the others are never read.

Example:
    >>> store = ParquetFileStore("laion")
    >>> store["12.caption"][0]
    'caption 12'
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from stoker.format.parquet import scan_parquet
from stoker.model.samples import SourceInfo
from stoker.pipeline.parquet_read import ParquetReader
from stoker.sources.aux import FileStore
from stoker.storage import open_store


class ParquetFileStore(FileStore):
    """The rows of a Parquet dataset's split by number (Energon's ``ParquetFileStore``)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        part_filter: Callable[[str], bool] | None = None,
        split_part: str = "train",
    ) -> None:
        self.path = str(path)
        store = open_store(self.path)
        layout = scan_parquet(store, split_part)
        self.columns = [c for c in layout.columns if part_filter is None or part_filter(c)]
        self._starts = np.concatenate([[0], np.cumsum(layout.rows)]).tolist()
        self._reader = ParquetReader(store, layout.files, columns=self.columns)

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        number, _, column = key.partition(".")
        if not number.isdigit() or int(number) >= len(self):
            raise self._missing(key, f": rows are numbered 0 to {len(self) - 1}")
        if column and column not in self.columns:
            raise self._missing(key, f": the columns read are {self.columns}")
        row = int(number)
        shard = bisect.bisect_right(self._starts, row) - 1
        raw = self._reader.read(shard, row - self._starts[shard])
        info = SourceInfo(
            dataset_path=self.path, index=row, shard_name=raw.shard, file_names=(key,)
        )
        return (raw.parts[column] if column else dict(raw.parts)), info

    def get_path(self) -> str:
        return self.path
