"""Factories of an indexed JSONL file: each line is one crude sample (``{"json": ...}``).

Example:
    >>> CrudeJsonlDatasetFactory.prepare_dataset("texts.jsonl")
    100
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


class CrudeJsonlDatasetFactory(BaseCoreDatasetFactory[CrudeSample]):
    """A JSONL file (prepared with ``prepare_dataset``) as a dataset of crude samples.

    Args: as :class:`~stoker.flavors.BaseWebdatasetFactory`, without split or split config (the
    whole file is one split).
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
        from stoker.sources.load import load_source

        self.path = as_epath(path)
        self.paths = [self.path]
        self.name = str(self.path).rsplit("/", 1)[-1]
        self._keep_loading_options(
            training=training,
            worker_config=worker_config,
            shuffle_over_epochs=shuffle_over_epochs,
            parallel_shard_iters=parallel_shard_iters,
            max_samples_per_sequence=max_samples_per_sequence,
            subset=subset,
            part_filter=part_filter,
        )
        self._keep_source(load_source(str(self.path)), "json")

    def __len__(self) -> int:
        return self._len

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        source = dataclasses.replace(self._source, subflavors=dict(self.subflavors or {}))
        return self._loader_dataset(source, self._decoder())

    def _decoder(self) -> Any:
        return None  # the json part as bytes

    def as_file_store(self) -> FileStore:
        from stoker.sources.aux import JsonlFileStore

        return JsonlFileStore(str(self.path))

    def config(self) -> dict[str, Any]:
        return self._loading_config(self.path, count=self._len)

    def __str__(self) -> str:
        return f"{type(self).__name__}(path={self.path})"

    @classmethod
    def prepare_dataset(cls, path: Any) -> int:
        """Write the JSONL file's index (``<file>.idx``); returns the number of samples."""
        from stoker.format.jsonl import prepare_jsonl

        return prepare_jsonl(str(as_epath(path)))[0]


class DefaultCrudeJsonlDatasetFactory(CrudeJsonlDatasetFactory):
    """:class:`CrudeJsonlDatasetFactory` with subflavors (``decoder`` is accepted and ignored:
    the ``json`` part is parsed already)."""

    def __init__(self, path: Any, *, subflavors: dict[str, Any] | None = None, **kwargs: Any):
        kwargs.pop("decoder", None)
        self.subflavors = dict(subflavors or {})
        super().__init__(path, **kwargs)

    def _decoder(self) -> Any:
        from stoker.pipeline.decode import SampleDecoder

        return SampleDecoder()  # parses the json part

    def config(self) -> dict[str, Any]:
        return {**super().config(), "subflavors": self.subflavors}
