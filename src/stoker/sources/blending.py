"""From a path (dataset, JSONL file or metadataset YAML) to data sources and their blend."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from stoker.errors import ConfigError
from stoker.metadataset import Metadataset, flatten, is_metadataset, load_metadataset
from stoker.metadataset.flatten import Leaf
from stoker.metadataset.nodes import AuxRef
from stoker.pipeline.schedule import BlendSpec
from stoker.sources.aux import check_aux
from stoker.sources.blender import Blender
from stoker.sources.joins import load_join_source
from stoker.sources.load import load_source
from stoker.sources.source import DataSource


def load_sources(
    path: str | list[str] | Blender | Metadataset,
    *,
    split_part: str,
    training: bool,
    dataset_config: str,
    split_config: str,
    subflavors: dict[str, Any] | None = None,
    allowed_modules: tuple[str, ...] = (),
    trust_sample_loader: bool = False,
    sample_type: type | None = None,
    allow_outside_paths: bool | None = None,
) -> tuple[list[DataSource], BlendSpec]:
    """The sources behind ``path`` and how to blend them (one source for a plain dataset).

    ``sample_type``: every dataset's samples must be of this class or a subclass (Energon's
    check); joined datasets are not checked (their joiner makes the samples).
    """
    options: dict[str, Any] = {
        "allowed_modules": tuple(allowed_modules),
        "trust_sample_loader": trust_sample_loader,
        "allow_outside_paths": allow_outside_paths,
    }
    typed: dict[str, Any] = {**options, "sample_type": sample_type}
    if isinstance(path, Metadataset):
        path = path.path
    if isinstance(path, Blender):
        sources = [
            load_source(p, split_part=split_part, split_config=split_config,
                        dataset_config=dataset_config, subflavors=subflavors, **typed)
            for p, _ in path.datasets
        ]  # fmt: skip
        if not training:
            return sources, BlendSpec("concat" if len(sources) > 1 else "single")
        return sources, path.blend_spec()
    if not isinstance(path, str) or not is_metadataset(path):  # a str, or .parquet files
        source = load_source(
            path,
            split_part=split_part,
            split_config=split_config,
            dataset_config=dataset_config,
            subflavors=subflavors,
            **typed,
        )
        return [source], BlendSpec()
    plan = flatten(load_metadataset(path), split_part, training=training)
    sources = [
        _leaf_source(leaf, dataset_config, split_config, subflavors, options, sample_type)
        for leaf in plan.leaves
    ]
    _warn_duplicates(plan.leaves, path)
    if plan.kind == "weighted":
        return sources, BlendSpec(
            "weighted", tuple(float(leaf.weight or 0) for leaf in plan.leaves), plan.schedule()
        )
    if plan.kind == "epochized":
        return sources, BlendSpec(
            "epochized", tuple(float(leaf.repetitions or 0) for leaf in plan.leaves)
        )
    return sources, BlendSpec("concat" if len(sources) > 1 else "single")


def _leaf_source(
    leaf: Leaf,
    dataset_config: str,
    split_config: str,
    subflavors: dict[str, Any] | None,
    options: dict[str, Any],
    sample_type: type | None = None,
) -> DataSource:
    if leaf.join is not None:  # subsets of joins count joined samples (joins.py)
        merged = dataclasses.replace(leaf, subflavors={**leaf.subflavors, **(subflavors or {})})
        source = load_join_source(merged, dataset_config, split_config, options)
    else:
        source = load_source(
            leaf.path,
            split_part=leaf.split_part,
            split_config=leaf.split_config or split_config,
            dataset_config=leaf.dataset_config or dataset_config,
            subflavors={**leaf.subflavors, **(subflavors or {})},
            sample_type=sample_type,
            **options,
        )
    if leaf.subset is not None and leaf.join is None:
        try:
            start, end = leaf.subset.resolve(int(source.counts.sum()))
        except (ConfigError, ValueError) as e:
            raise ConfigError(f"invalid subset: {e}", path=leaf.path) from None
        source = source.restrict(start, end)
    if leaf.shuffle_over_epochs_multiplier != 1:  # absent from the metadataset: 1
        multiplier = leaf.shuffle_over_epochs_multiplier  # null: slices in order (0 in the plan)
        source = dataclasses.replace(
            source, shuffle_over_epochs_multiplier=0 if multiplier is None else multiplier
        )
    if leaf.aux:
        source = dataclasses.replace(source, aux=_checked_aux(leaf, source))
    if leaf.group is not None:
        source = dataclasses.replace(source, group=leaf.group)
    return source


def _checked_aux(leaf: Leaf, source: DataSource) -> dict[str, AuxRef]:
    """The leaf's aux references, checked in the main process (Energon checks them at load)."""
    if not source.config.is_crude:
        raise ConfigError(
            "aux stores are only for crude datasets (they are passed to cookers).",
            path=leaf.path,
            hint="Use a CrudeWebdataset (or a JSONL file) with cookers, or remove aux.",
        )
    for ref in leaf.aux.values():
        check_aux(ref)
    return dict(leaf.aux)


def _warn_duplicates(leaves: list[Leaf], path: str) -> None:
    seen: set[tuple[str, str, str | None]] = set()
    for leaf in leaves:  # the same data under another dataset.yaml is another dataset
        key = (leaf.path, leaf.split_part, leaf.dataset_config)
        if key in seen:
            warnings.warn(
                f"{path}: dataset {leaf.path!r} (split {leaf.split_part!r}) is named more than "
                "once; each occurrence gets its own independent sample order.",
                UserWarning,
                stacklevel=4,
            )
        seen.add(key)
