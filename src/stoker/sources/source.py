"""A data source: one split of one prepared dataset (tar shards, a JSONL file, or a Megatron
``.bin``/``.idx`` token file).

``load_source`` reads the meta files once in the main process; the source is small, immutable and
picklable, so dataloader workers receive it as is and open their own readers.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError
from stoker.format.dataset_config import DatasetConfig
from stoker.format.parquet import SUFFIX
from stoker.metadataset.nodes import AuxRef
from stoker.pipeline.read import ShardReader
from stoker.pipeline.read_binidx import BinIdxReader
from stoker.storage import open_store, split_location

if TYPE_CHECKING:
    from stoker.sources.joins import JoinSpec

CRUDE_JSONL = DatasetConfig(sample_type=None, sample_module="stoker")


class EmptyDatasetError(ConfigError):
    """The split part has no samples: no shards, or every shard or sample in it is excluded
    (Energon's name; ``preview --split-parts`` and ``lint`` skip such split parts)."""


@dataclass(frozen=True)
class DataSource:
    """The shards of one split, their sample counts, exclusions and how to build samples."""

    path: str
    split_part: str
    shards: tuple[str, ...]
    counts: npt.NDArray[np.int64]
    config: DatasetConfig
    excluded: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    jsonl: bool = False
    subflavors: dict[str, Any] = field(default_factory=dict)
    #: Run ``.nv-meta/sample_loader.py`` (user code shipped with the data) if the config names it.
    trust_sample_loader: bool = False
    #: Multiplies the loader's ``shuffle_over_epochs_multiplier`` for this source (Energon's
    #: rule, :func:`stoker.plan.order.combine_multipliers`): 1 where a metadataset does not set
    #: it, 0 where it sets ``null`` (slices in order, whatever the loader's value), -1 with
    #: replacement.
    shuffle_over_epochs_multiplier: int = 1
    #: Per shard, the index of its first sample in this source (set by :meth:`restrict`).
    first_index: npt.NDArray[np.int64] | None = None
    #: The samples ``[start, end)`` of the split this source was cut to (set by :meth:`restrict`).
    subset: tuple[int, int] | None = None
    #: Aux stores for the cookers of crude samples, by name (a metadataset's ``aux:``).
    aux: dict[str, AuxRef] = field(default_factory=dict)
    #: The partner datasets of a join (a metadataset ``join:``); this source is its primary.
    join: JoinSpec | None = None
    #: A Megatron token dataset: the one shard is a ``.bin`` (:mod:`stoker.sources.binidx`).
    binidx: bool = False
    #: A Parquet dataset (:mod:`stoker.format.parquet`): the shards are its files of this split.
    parquet: bool = False
    #: Of a Parquet dataset, its media columns: name -> ``image``/``audio``.
    media: dict[str, str] = field(default_factory=dict)
    #: Its packing group (a metadataset's ``group:``; None: the default group), which picks its
    #: packing buffer and the per-group ``packing_buffer_size`` / ``shuffle_buffer_size``.
    group: str | None = None
    #: Of a Parquet dataset, the columns its files have.
    columns: tuple[str, ...] = ()
    #: Of a Parquet dataset, the only columns read (a factory's ``part_filter``); None: those
    #: the field map uses, else all.
    read_columns: tuple[str, ...] | None = None

    @property
    def root(self) -> str:
        """The folder holding the shards (the file's folder for JSONL and ``.bin``)."""
        one_file = self.jsonl or self.binidx or (self.parquet and self.path.endswith(SUFFIX))
        return split_location(self.path)[0] if one_file else self.path

    @property
    def total(self) -> int:
        """Samples in the split after exclusions."""
        return int(self.counts.sum()) - len(self.excluded)

    def restrict(self, start: int, end: int) -> DataSource:
        """Only samples ``start <= i < end`` of the split (a metadataset ``subset``).

        Example:
            >>> from stoker.sources.load import load_source
            >>> source = load_source("coco-wds", split_part="train")
            >>> source.total, source.restrict(10, 30).total
            (40, 20)
        """
        total = int(self.counts.sum())
        if not 0 <= start <= end <= total:
            raise ConfigError(
                f"subset [{start}, {end}) is outside the split's {total} samples.",
                path=self.path,
                hint="Check the subset range in the metadataset.",
            )
        cum = np.concatenate(([0], np.cumsum(self.counts)))
        lo, hi = np.maximum(cum[:-1], start), np.minimum(cum[1:], end)
        keep = np.flatnonzero(hi > lo)
        first = (lo - cum[:-1])[keep]
        if self.first_index is not None:
            first = first + self.first_index[keep]
        excluded = self.excluded[(self.excluded >= start) & (self.excluded < end)] - start
        base = self.subset[0] if self.subset is not None else 0
        return dataclasses.replace(
            self,
            shards=tuple(self.shards[i] for i in keep.tolist()),
            counts=(hi - lo)[keep].astype(np.int64),
            excluded=excluded.astype(np.int64),
            first_index=first.astype(np.int64),
            subset=(base + start, base + end),
            join=None if self.join is None else self.join.restrict(start, end),
        )

    def reader(self) -> ShardReader:
        if self.binidx:
            return BinIdxReader(open_store(self.root), self.shards)
        if self.parquet:
            from stoker.pipeline.parquet_read import ParquetReader

            used = self.config.parts_used() if self.config.field_map is not None else None
            columns = None if used is None else sorted(used)
            if self.read_columns is not None:
                columns = list(self.read_columns)
            reader: Any = ParquetReader(
                open_store(self.root), self.shards, columns=columns, media=self.media
            )
            return reader  # type: ignore[no-any-return]  # ShardReader's interface
        return ShardReader(open_store(self.root), self.shards, jsonl=self.jsonl)
