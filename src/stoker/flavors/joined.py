"""``JoinedWebdatasetFactory``: samples of several datasets with the same key, joined into one.

Stoker's metadataset ``join:`` is the usual way to join; this class gives Energon's Python
form over the same machinery (:mod:`stoker.sources.joins`): the first dataset is the primary, each
partner's sample is found by key, and the joiner (a Sample class, whose ``from_joined`` is
called, or an importable function) makes the joined sample. Primary samples that lack a
partner are skipped.

Example:
    >>> from stoker import CaptioningSample, get_dataset_from_config, get_loader
    >>> images, recaptioned = (
    ...     get_dataset_from_config(name, split_part="train", training=False, worker_config=wc)
    ...     for name in ("coco-wds", "coco-recap")
    ... )
    >>> joined = JoinedWebdatasetFactory(
    ...     [images, recaptioned], training=False, worker_config=wc,
    ...     join_index=None, joiner=CaptioningSample,
    ... )
    >>> sample = next(iter(get_loader(joined.build())))
    >>> sample.__key__, sample.caption
    ('000000', 'a photo of a green square on white')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import ConfigError
from stoker.flavors.base import BaseCoreDatasetFactory
from stoker.flavors.webdataset import BaseWebdatasetFactory
from stoker.metadataset.nodes import ObjectRef

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.aux import FileStore


class JoinedWebdatasetFactory(BaseCoreDatasetFactory[Any]):
    """Joins the samples of ``inner_datasets`` (a list, or a dict: the joiner gets keywords).

    ``join_index`` is accepted for Energon's signature; stoker matches keys itself (and caches
    the index when the join comes from a metadataset).
    """

    def __init__(
        self,
        inner_datasets: Sequence[BaseWebdatasetFactory[Any]]
        | Mapping[str, BaseWebdatasetFactory[Any]],
        *,
        training: bool,
        worker_config: WorkerConfig,
        shuffle_over_epochs: int | None = 1,
        parallel_shard_iters: int | None = None,
        max_samples_per_sequence: int | None = None,
        subset: Any = None,
        join_index: Any = None,
        joiner: Any,
    ) -> None:
        if isinstance(inner_datasets, Mapping):
            self.inner_dataset_keys: list[str] | None = list(inner_datasets)
            inner = list(inner_datasets.values())
        else:
            self.inner_dataset_keys = None
            inner = list(inner_datasets)
        if len(inner) < 2:
            raise ConfigError("a join needs at least two datasets.")
        if not callable(joiner):
            raise ConfigError(f"the joiner {joiner!r} must be a Sample class or a function.")
        self.__sample_type__ = joiner
        self.inner_datasets = inner
        self.paths = [path for d in inner for path in d.paths]
        self.subflavors = dict(inner[0].subflavors)
        self._keep_loading_options(
            training=training,
            worker_config=worker_config,
            shuffle_over_epochs=shuffle_over_epochs,
            parallel_shard_iters=parallel_shard_iters,
            max_samples_per_sequence=max_samples_per_sequence,
            subset=subset,
        )
        self.join_index = join_index
        self._joiner = ObjectRef(joiner.__module__, joiner.__qualname__)

    def __len__(self) -> int:
        return len(self.inner_datasets[0])

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        from stoker.sources.joins import JoinSpec, build_locations

        sources = [d.built_source() for d in self.inner_datasets]
        locations = build_locations(sources)
        primary = sources[0]
        missing = np.flatnonzero((locations < 0).any(axis=0))
        excluded = np.union1d(primary.excluded, missing).astype(np.int64)
        names = tuple(self.inner_dataset_keys) if self.inner_dataset_keys else None
        spec = JoinSpec(tuple(sources[1:]), locations, names, self._joiner)
        source = dataclasses.replace(primary, excluded=excluded, join=spec)
        if self.subset is not None:
            source = source.restrict(*self.subset.resolve(int(source.counts.sum())))
        return self._loader_dataset(source, self.inner_datasets[0].native_decoder())

    def as_file_store(self) -> FileStore:
        raise ConfigError(
            "a joined dataset has no single file store.",
            hint="Use as_file_store() of one of its inner datasets.",
        )
