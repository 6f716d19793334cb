"""Factories of a Parquet dataset (a folder of ``.parquet`` files, a row per sample), as in
Energon's ``DefaultParquetDatasetFactory`` (pull request #227).

Example:
    >>> from stoker import get_loader
    >>> factory = DefaultParquetDatasetFactory(
    ...     "laion", training=False, worker_config=wc, subflavors={"src": "laion"}
    ... )
    >>> sample = next(iter(get_loader(factory.build())))
    >>> sample["caption"], sample["width"]
    ('caption 0', 0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError
from stoker.flavors.base import BaseCoreDatasetFactory, as_epath
from stoker.flavors.generic import DEFAULT_DECODER
from stoker.model.samples import CrudeSample

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.aux import FileStore


class DefaultParquetDatasetFactory(BaseCoreDatasetFactory[CrudeSample]):
    """The rows of a Parquet folder's split as crude samples (column -> value; media columns
    decoded by ``decoder``, none decoded with ``decoder=None``).

    Args: as :class:`~stoker.flavors.CrudeJsonlDatasetFactory`, plus ``split_part`` (from the
    file names, see :mod:`stoker.format.parquet`), ``subflavors`` and ``decoder``. Energon's
    ``decode_map`` is accepted only as None: stoker decodes media columns by their type.
    ``part_filter(column) -> bool`` reads only the columns it keeps (each sample has those).
    """

    __sample_type__ = CrudeSample

    def __init__(
        self,
        path: Any,
        *,
        training: bool,
        worker_config: WorkerConfig,
        split_part: str = "train",
        subflavors: dict[str, Any] | None = None,
        decoder: Any = DEFAULT_DECODER,
        decode_map: Any = None,
        shuffle_over_epochs: int | None = 1,
        parallel_shard_iters: int | None = None,
        max_samples_per_sequence: int | None = None,
        subset: Any = None,
        part_filter: Callable[[str], bool] | None = None,
    ) -> None:
        from stoker.sources.load import load_source

        if decode_map is not None:
            raise ConfigError(
                f"decode_map={decode_map!r} is not supported.",
                path=str(path),
                hint="Leave decode_map=None: stoker decodes Hugging Face Image/Audio columns by "
                "their type; decode other columns in a cooker.",
            )
        self.path = as_epath(path)
        self.paths = [self.path]
        self.subflavors = dict(subflavors or {})
        self._keep_loading_options(
            training=training,
            worker_config=worker_config,
            shuffle_over_epochs=shuffle_over_epochs,
            parallel_shard_iters=parallel_shard_iters,
            max_samples_per_sequence=max_samples_per_sequence,
            subset=subset,
        )
        self._decoder = decoder
        source = load_source(str(self.path), split_part=split_part)
        if not source.parquet:
            raise ConfigError(
                "DefaultParquetDatasetFactory needs a folder of .parquet files.",
                path=str(self.path),
                hint="Pass a folder holding .parquet files (and no .nv-meta/.info.json).",
            )
        if part_filter is not None:
            source = self._filtered(source, part_filter)
        self._keep_source(source)

    def _filtered(self, source: Any, part_filter: Callable[[str], bool]) -> Any:
        """``source`` reading only the columns ``part_filter`` keeps (the rows stay all)."""
        columns = source.columns
        kept = tuple(c for c in columns if part_filter(c))
        if not kept:
            raise ConfigError(
                f"part_filter keeps none of the Parquet columns {list(columns)}.",
                path=str(self.path),
                hint="Let part_filter return True for the columns the samples need.",
            )
        media = {k: v for k, v in source.media.items() if k in kept}
        return dataclasses.replace(source, read_columns=kept, media=media)

    def __len__(self) -> int:
        return self._source.total

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        subflavors = {**self._source.subflavors, **self.subflavors}
        return self._loader_dataset(
            dataclasses.replace(self._source, subflavors=subflavors), self._decoder
        )

    def as_file_store(self) -> FileStore:
        from stoker.sources.parquet_store import ParquetFileStore

        return ParquetFileStore(str(self.path), split_part=self._source.split_part)

    def config(self) -> dict[str, Any]:
        return {
            **self._loading_config(self.path, count=len(self)),
            "subflavors": self.subflavors,
        }

    def __str__(self) -> str:
        return f"{type(self).__name__}(path={self.path})"
