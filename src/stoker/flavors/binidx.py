"""Factories of a Megatron token dataset (``.bin`` + ``.idx``): each sequence is one crude sample
with a ``tokens`` array, as in Energon's ``BinIdxDatasetFactory`` (pull request #227).

Example:
    >>> factory = DefaultBinIdxDatasetFactory(
    ...     "corpus_text_document.bin", training=True, worker_config=wc
    ... )
    >>> len(factory)
    1000
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from stoker.flavors.base import BaseCoreDatasetFactory, as_epath
from stoker.model.samples import CrudeSample

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.aux import FileStore
    from stoker.sources.source import DataSource


class BinIdxDatasetFactory(BaseCoreDatasetFactory[CrudeSample]):
    """A ``.bin`` whose ``.idx`` sits beside it (or their common prefix) as a dataset of crude
    samples ``{"tokens": array}``, keyed by the sequence's index. No preparation is needed.

    Args: as :class:`~stoker.flavors.CrudeJsonlDatasetFactory` (the whole file is one split).
    """

    __sample_type__ = CrudeSample

    def __init__(
        self,
        path: Any,
        *,
        training: bool,
        worker_config: WorkerConfig,
        shuffle_over_epochs: int | None = 1,
        parallel_shard_iters: int | None = None,
        max_samples_per_sequence: int | None = None,
        subset: Any = None,
        part_filter: Any = None,
    ) -> None:
        from stoker.sources.binidx import binidx_source, token_dataset

        location = str(as_epath(path))
        bin_path = token_dataset(location) or location
        self.path = as_epath(bin_path)
        self.paths = [self.path]
        self.name = bin_path.rsplit("/", 1)[-1]
        self._keep_loading_options(
            training=training,
            worker_config=worker_config,
            shuffle_over_epochs=shuffle_over_epochs,
            parallel_shard_iters=parallel_shard_iters,
            max_samples_per_sequence=max_samples_per_sequence,
            subset=subset,
            part_filter=part_filter,
        )
        self._keep_source(binidx_source(bin_path, "train", {}), "tokens")

    def __len__(self) -> int:
        return self._len

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        source = dataclasses.replace(self._source, subflavors=dict(self.subflavors or {}))
        return self._loader_dataset(source, None)

    def as_file_store(self) -> FileStore:
        from stoker.sources.binidx import BinIdxFileStore

        return BinIdxFileStore(str(self.path))

    def config(self) -> dict[str, Any]:
        return self._loading_config(self.path, bin_filename=self.name, count=self._len)

    def __str__(self) -> str:
        return f"{type(self).__name__}(path={self.path})"


class DefaultBinIdxDatasetFactory(BinIdxDatasetFactory):
    """:class:`BinIdxDatasetFactory` with subflavors (``decoder`` is accepted and ignored: the
    tokens arrive as an array)."""

    def __init__(self, path: Any, *, subflavors: dict[str, Any] | None = None, **kwargs: Any):
        kwargs.pop("decoder", None)
        self.subflavors = dict(subflavors or {})
        super().__init__(path, **kwargs)

    @classmethod
    def of_source(cls, source: DataSource, **options: Any) -> DefaultBinIdxDatasetFactory:
        """The factory of a token source already loaded (a metadataset's dataset: its subset,
        subflavors and epoch multiplier kept); ``options`` as the constructor's."""
        factory = cls(source.path, subflavors=source.subflavors, **options)
        factory._source = source
        factory._len = source.total
        return factory

    def config(self) -> dict[str, Any]:
        return {**super().config(), "subflavors": self.subflavors}
