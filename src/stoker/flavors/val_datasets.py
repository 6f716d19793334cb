"""``get_val_datasets``: one validation dataset per source, each with the factory it came from.

Energon returns ``[(dataset, source_factory)]``: the datasets of a metadataset's val split
one by one (each evaluated on its own), and for each the dataset factory of its source, whose
``subflavors`` are the ones that source's samples carry. Megatron-LM's multimodal example
wraps each dataset in ``LimitDataset(RepeatDataset(...))`` and gives it its own loader.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from stoker.errors import ConfigError
from stoker.flavors.base import BaseCoreDatasetFactory, loader_dataset
from stoker.metadataset import Metadataset, SubsetRange, is_metadataset
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.schedule import BlendSpec
from stoker.runtime.dataset import LoaderDataset
from stoker.sources.aux import FileStore, WebdatasetFileStore
from stoker.sources.blender import Blender
from stoker.sources.source import DataSource
from stoker.storage.epath import EPath


class SourceDatasetFactory(BaseCoreDatasetFactory[Any]):
    """The factory of one loaded source: its path, split, subflavors and sample count.

    ``build()`` gives the source's unbatched samples in order (one pass), as a val factory's.

    Example:
        >>> from stoker import get_val_datasets
        >>> (val, factory), *_ = get_val_datasets("mix.yaml", worker_config=wc, batch_size=4)
        >>> factory.subflavors, len(factory)
        ({'source': 'coco'}, 10)
    """

    def __init__(
        self,
        source: DataSource,
        *,
        worker_config: WorkerConfig,
        decoder: Any,
        training: bool = False,
        max_samples_per_sequence: int | None = None,
        parallel_shard_iters: int | None = None,
    ) -> None:
        self.source = source
        self.path = EPath(source.path)
        self.paths = [self.path]
        self.split_part = source.split_part
        self.subflavors = dict(source.subflavors)
        self.training = training
        self.worker_config = worker_config
        self._decoder = decoder
        self._max_samples_per_sequence = max_samples_per_sequence
        self._parallel_shard_iters = parallel_shard_iters

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        source = dataclasses.replace(self.source, subflavors=dict(self.subflavors))
        return loader_dataset(
            source,
            training=self.training,
            worker_config=self.worker_config,
            decoder=self._decoder,
            parallel_shard_iters=self._parallel_shard_iters,
            max_samples_per_sequence=self._max_samples_per_sequence,
            shuffle_over_epochs=1,  # the source's own multiplier applies (the plan combines)
        )

    def as_file_store(self) -> FileStore:
        if self.source.jsonl or self.source.join is not None:
            raise ConfigError(
                "only a webdataset source has a file store.",
                path=self.source.path,
                hint="Use a prepared tar-shard dataset (or the join's inner datasets).",
            )
        return WebdatasetFileStore(self.source.path)

    def __len__(self) -> int:
        return self.source.total

    def __str__(self) -> str:
        return f"{type(self).__name__}(path={self.source.path}, split_part={self.split_part})"


def per_source(dataset: LoaderDataset) -> list[tuple[LoaderDataset, SourceDatasetFactory]]:
    """``dataset`` (a val dataset of one or more sources) split into one dataset per source."""
    return [
        (
            dataclasses.replace(dataset, sources=[source], blend=BlendSpec()),
            SourceDatasetFactory(
                source,
                worker_config=dataset.worker_config,
                decoder=dataset.task_encoder.decoder,
                max_samples_per_sequence=dataset.max_samples_per_sequence,
            ),
        )
        for source in dataset.sources
    ]


def restrict_sources(sources: list[DataSource], subset: Any, path: object) -> list[DataSource]:
    """Each source cut to ``subset`` (Energon's ``DatasetSubset``, with ``range`` as fractions
    and/or ``absolute_range`` as sample indices, or a :class:`~stoker.metadataset.SubsetRange`)."""
    if isinstance(path, Metadataset) or (
        not isinstance(path, Blender) and is_metadataset(str(path))
    ):
        raise ConfigError(
            "subset= is for a dataset folder; a metadataset sets subsets itself.",
            hint="Write subset: {range: [...]} on the metadataset's dataset references.",
        )
    if not isinstance(subset, SubsetRange):
        fractions = getattr(subset, "range", None) or (0.0, 1.0)
        absolute = getattr(subset, "absolute_range", None)
        subset = SubsetRange(
            float(fractions[0]), float(fractions[1]), None if absolute is None else tuple(absolute)
        )
    out = []
    for source in sources:
        try:
            start, end = subset.resolve(int(source.counts.sum()))
        except ValueError as e:
            raise ConfigError(f"invalid subset: {e}", path=source.path) from None
        out.append(source.restrict(start, end))
    return out
