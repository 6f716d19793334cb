"""``get_dataset_from_config``: the factory a dataset's ``.nv-meta/dataset.yaml`` describes.

Example:
    >>> from stoker import CaptioningSample, WorkerConfig, get_loader
    >>> factory = get_dataset_from_config(
    ...     "coco-wds", split_part="train", training=False,
    ...     worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
    ...     sample_type=CaptioningSample,
    ... )
    >>> len(factory), [s.__key__ for s in get_loader(factory.build())][:2]
    (40, ['000000', '000001'])
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from stoker.errors import ConfigError
from stoker.flavors.base import BaseCoreDatasetFactory, as_epath
from stoker.flavors.binidx import DefaultBinIdxDatasetFactory
from stoker.flavors.generic import StandardWebdatasetFactory
from stoker.flavors.jsonl import DefaultCrudeJsonlDatasetFactory
from stoker.flavors.typed import CrudeWebdataset
from stoker.format.dataset_config import DatasetConfig
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.model.samples import CrudeSample
from stoker.model.worker_config import WorkerConfig
from stoker.sources.allow import check_sample_type, make_factory
from stoker.sources.binidx import token_dataset
from stoker.sources.load import load_source
from stoker.sources.source import DataSource

T_sample = TypeVar("T_sample")


def get_dataset_from_config(
    path: Any,
    *,
    dataset_config: str | None = None,
    split_config: str | None = None,
    split_part: str | None = None,
    training: bool = True,
    subflavors: dict[str, Any] | None = None,
    worker_config: WorkerConfig,
    sample_type: type[T_sample] | None = None,
    **kwargs: Any,
) -> BaseCoreDatasetFactory[T_sample]:
    """The dataset factory of the prepared dataset (or indexed ``.jsonl`` file) at ``path``.

    Args:
        path: Dataset folder or ``.jsonl`` file (str, ``pathlib.Path`` or ``EPath``).
        dataset_config: The dataset config in ``.nv-meta`` (default ``dataset.yaml``).
        split_config: The split file in ``.nv-meta`` (default ``split.yaml``; a
            ``split_config:`` key in the dataset config wins, as in Energon).
        split_part: The split (default ``train``; ignored for JSONL).
        training: Shuffle and loop (True) or one pass in order (False) when built.
        subflavors: Merged over the dataset's subflavors.
        worker_config: Ranks and dataloader workers.
        sample_type: The samples must be of this class or a subclass (else ConfigError).
        **kwargs: More factory arguments (``max_samples_per_sequence``, ``decoder``, ...) and
            stoker's ``allowed_modules`` / ``trust_sample_loader``.
    """
    allowed = tuple(kwargs.pop("allowed_modules", ()))
    trust = bool(kwargs.pop("trust_sample_loader", False))
    location = str(as_epath(path))
    if location.endswith(".jsonl"):
        if sample_type not in (None, CrudeSample):
            raise ConfigError(
                f"a JSONL dataset yields CrudeSample, not {sample_type!r}.", path=location
            )
        if dataset_config is not None or split_config is not None:
            raise ConfigError("a JSONL dataset has no dataset or split config.", path=location)
        factory: Any = DefaultCrudeJsonlDatasetFactory(
            path, training=training, subflavors=subflavors, worker_config=worker_config, **kwargs
        )
        return factory  # type: ignore[no-any-return]
    source = None
    if (bin_path := token_dataset(location, prefix=False)) is None:
        source = load_source(
            location,
            split_part=split_part or "train",
            split_config=split_config or DEFAULT_SPLIT_CONFIG,
            dataset_config=dataset_config or DEFAULT_DATASET_YAML,
            allowed_modules=allowed,
            trust_sample_loader=trust,
        )
    if source is None or source.binidx:  # a .bin/.idx, or their prefix
        if sample_type not in (None, CrudeSample):
            raise ConfigError(
                f"a .bin/.idx token dataset yields CrudeSample, not {sample_type!r}.",
                path=location,
            )
        if dataset_config is not None or split_config is not None:
            raise ConfigError("a token dataset has no dataset or split config.", path=location)
        return DefaultBinIdxDatasetFactory(  # type: ignore[return-value]
            bin_path or source.path,  # type: ignore[union-attr]
            training=training,
            subflavors=subflavors,
            worker_config=worker_config,
            **kwargs,
        )
    options = {
        "split_config": source.config.split_config or split_config or DEFAULT_SPLIT_CONFIG,
        "split_part": source.split_part,
        "training": training,
        "worker_config": worker_config,
        **kwargs,
    }
    factory = _factory(path, source, options, trust)
    if subflavors is not None:
        factory.subflavors.update(subflavors)
    if sample_type is not None:
        check_sample_type(source, sample_type)
    return factory  # type: ignore[no-any-return]


def _factory(path: Any, source: DataSource, options: dict[str, Any], trust: bool) -> Any:
    """The factory class the dataset.yaml names, made with its keys and ``options``."""
    config: DatasetConfig = source.config
    if config.factory is not None:
        ref = config.factory
        kwargs = {**options, **ref.kwargs}  # the dataset.yaml's keys win, as in Energon
        if trust:
            kwargs["trust_sample_loader"] = True
        ref = dataclasses.replace(ref, kwargs=kwargs, args=(path,), from_yaml=False)
        return make_factory(
            dataclasses.replace(source, config=dataclasses.replace(config, factory=ref)), None
        )
    common: dict[str, Any] = {
        **options,
        "subflavors": dict(config.subflavors),
        "trust_sample_loader": trust,
    }
    if config.part_filter is not None:
        common["part_filter"] = config.part_filter
    if config.is_crude:
        return CrudeWebdataset(path, **common)
    spec: dict[str, Any] = (
        {"sample_loader": config.sample_loader}
        if config.sample_loader is not None
        else {"field_map": _raw_field_map(config)}
    )
    sample_class = source_class(config)
    return StandardWebdatasetFactory(path, sample_type=sample_class, **spec, **common)


def source_class(config: DatasetConfig) -> Any:
    """The sample class a (non-factory, typed) dataset config names."""
    from stoker.model.samples import SAMPLE_CLASSES

    if config.sample_class is not None:
        return config.sample_class
    return SAMPLE_CLASSES[config.sample_type or ""]


def _raw_field_map(config: DatasetConfig) -> dict[str, str]:
    return {
        name: ",".join(a.part + "".join(f"[{p}]" for p in a.path) for a in options)
        for name, options in (config.field_map or {}).items()
    }
