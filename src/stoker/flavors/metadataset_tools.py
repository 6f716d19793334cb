"""Energon's ``traverse_metadataset``, ``prepare_metadataset`` and ``get_datasets``, over
stoker's parser.

``traverse_metadataset`` lists the leaf datasets one split reads, with the subflavors the
metadataset hierarchy gives them (not those of each dataset's own ``dataset.yaml``), without
opening any dataset. ``prepare_metadataset`` builds the join index of every join, as
``stoker prepare mds.yaml`` does. ``load_dataset(mds)`` returns a :class:`LoadedMetadataset`
whose ``get_datasets`` lists the loaded datasets of a split with their weights.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError
from stoker.flavors.binidx import DefaultBinIdxDatasetFactory
from stoker.flavors.generic import DEFAULT_DECODER
from stoker.flavors.val_datasets import SourceDatasetFactory
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.metadataset import (
    DatasetBlendMode,
    LoadedDataset,
    LoadedDatasetList,
    Metadataset,
    flatten,
    is_metadataset,
    load_metadataset,
)
from stoker.model.worker_config import WorkerConfig
from stoker.plan.order import combine_multipliers
from stoker.sources.blending import load_sources
from stoker.sources.joins import JoinReport, prepare_joins
from stoker.storage.epath import EPath

_MODES = {
    "weighted": DatasetBlendMode.DATASET_WEIGHT,
    "epochized": DatasetBlendMode.SAMPLE_REPETITIONS,
}


@dataclass
class TraversedDatasetReference:
    """One leaf dataset of a metadataset split (Energon's class of the same name)."""

    path: EPath
    split_part: str
    aux: dict[str, EPath] = field(default_factory=dict)
    subflavors: dict[str, Any] = field(default_factory=dict)
    #: The packing group (``group:`` names along the path, joined with ``+``).
    group: str | None = None
    shuffle_over_epochs_multiplier: int | None = 1


def traverse_metadataset(
    path: str | os.PathLike[str] | EPath, *, split_part: str, **kwargs: Any
) -> list[TraversedDatasetReference]:
    """The leaf datasets of ``split_part``, nested metadatasets resolved, in blend order.

    Subflavors merge as when loading (outer levels win); a reference's ``split_part`` applies
    to everything below it. Datasets are not opened, so a missing one is still listed.
    Joins are not supported (as in Energon: ``NotImplementedError``).

    Example:
        >>> refs = traverse_metadataset("mix.yaml", split_part="train")
        >>> [(r.path.name, r.subflavors) for r in refs]
        [('coco-wds', {'source': 'coco'}), ('coyo-wds', {})]
    """
    location = _metadataset_path(path, "traverse_metadataset")
    plan = flatten(load_metadataset(location), split_part, training=False)
    out = []
    for leaf in plan.leaves:
        if leaf.join is not None:
            raise NotImplementedError("traverse_metadataset() does not support joined datasets.")
        out.append(
            TraversedDatasetReference(
                path=EPath(leaf.path),
                split_part=leaf.split_part,
                aux={name: EPath(ref.path) for name, ref in leaf.aux.items()},
                subflavors=dict(leaf.subflavors),
                group=leaf.group,
                shuffle_over_epochs_multiplier=leaf.shuffle_over_epochs_multiplier,
            )
        )
    return out


def prepare_metadataset(
    path: str | os.PathLike[str] | EPath, *, allowed_modules: tuple[str, ...] = ()
) -> list[JoinReport]:
    """Build the join index of every join of every split (what ``stoker prepare mds.yaml`` does).

    Energon's function returns nothing; stoker returns one report per join (empty without
    joins). ``allowed_modules`` lets joiners from those modules be named.

    Example:
        >>> [r.matched for r in prepare_metadataset("joined.yaml")]
        [(40,)]
    """
    location = _metadataset_path(path, "prepare_metadataset")
    return prepare_joins(location, allowed_modules=allowed_modules)


def _metadataset_path(path: str | os.PathLike[str] | EPath, caller: str) -> str:
    location = path if isinstance(path, str) else str(path)
    if not is_metadataset(location):
        raise ConfigError(
            f"{caller} needs a metadataset YAML file, got {location!r}.",
            hint="Pass a .yaml file with splits: (MetadatasetV2, or V1 with datasets: lists).",
        )
    return location


@dataclass(frozen=True)
class LoadedMetadataset(Metadataset):
    """A parsed metadataset that can also list its loaded datasets (what ``load_dataset``
    returns for a metadataset); usable wherever a metadataset path goes."""

    def get_datasets(
        self,
        *,
        training: bool,
        split_part: str,
        worker_config: WorkerConfig,
        subflavors: dict[str, Any] | None = None,
        shuffle_over_epochs_multiplier: int | None = 1,
        subset: Any = None,
        decoder: Any = DEFAULT_DECODER,
        max_samples_per_sequence: int | None = None,
        parallel_shard_iters: int | None = None,
        dataset_config: str | None = None,
        split_config: str | None = None,
    ) -> LoadedDatasetList:
        """The datasets of ``split_part``, each as a factory with its weight (a ``blend``) or
        repetitions (a ``blend_epochized``), as Energon's ``get_datasets``; a token dataset's
        factory is a :class:`~stoker.flavors.DefaultBinIdxDatasetFactory`.

        Example:
            >>> from stoker import load_dataset
            >>> found = load_dataset("mix.yaml").get_datasets(
            ...     training=False, split_part="train", worker_config=wc)
            >>> [(d.dataset.paths[0].name, d.weight) for d in found.datasets]
            [('coco-wds', 0.7), ('coyo-wds', 0.3)]
        """
        if subset is not None:
            raise ConfigError(
                "subset= is for a dataset folder; a metadataset sets subsets itself.",
                path=self.path,
            )
        with warnings.catch_warnings():  # listing datasets named twice is not a mistake here
            warnings.filterwarnings("ignore", message=".*is named more than once")
            sources, blend = load_sources(
                self.path,
                split_part=split_part,
                training=True,  # the blend's weights, also when listing val datasets
                dataset_config=dataset_config or DEFAULT_DATASET_YAML,
                split_config=split_config or DEFAULT_SPLIT_CONFIG,
                subflavors=subflavors,
            )
        mode = _MODES.get(blend.kind, DatasetBlendMode.NONE)
        factors: list[float | None] = list(blend.factors) or [None] * len(sources)
        sources = [
            dataclasses.replace(
                source,
                shuffle_over_epochs_multiplier=combine_multipliers(
                    shuffle_over_epochs_multiplier, source.shuffle_over_epochs_multiplier
                ),
            )
            for source in sources
        ]
        options: dict[str, Any] = {
            "worker_config": worker_config,
            "training": training,
            "max_samples_per_sequence": max_samples_per_sequence,
            "parallel_shard_iters": parallel_shard_iters,
        }
        datasets = [
            LoadedDataset(
                DefaultBinIdxDatasetFactory.of_source(source, **options)
                if source.binidx
                else SourceDatasetFactory(source, decoder=decoder, **options),
                weight=factor if mode is DatasetBlendMode.DATASET_WEIGHT else None,
                repetitions=factor if mode is DatasetBlendMode.SAMPLE_REPETITIONS else None,
                group=source.group,
            )
            for source, factor in zip(sources, factors, strict=True)
        ]
        return LoadedDatasetList(datasets, mode)

    def post_initialize(self, mds_path: Any = None) -> None:
        """Nothing to do: stoker checks a metadataset when it parses it (Energon's hook)."""

    def traverse(self, *, split_part: str) -> list[TraversedDatasetReference]:
        """:func:`traverse_metadataset` of this metadataset."""
        return traverse_metadataset(self.path, split_part=split_part)

    def prepare(self, split_part: str | None = None) -> list[JoinReport]:
        """:func:`prepare_metadataset` of this metadataset (every split)."""
        return prepare_metadataset(self.path)


def loaded_metadataset(path: str) -> LoadedMetadataset:
    """The metadataset at ``path``, parsed and checked."""
    parsed = load_metadataset(path)
    return LoadedMetadataset(parsed.path, parsed.splits, parsed.version)
