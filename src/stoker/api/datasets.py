"""Energon's dataset entry points: ``get_train_dataset``, ``get_val_dataset(s)``.

Same names and keyword arguments as ``megatron.energon``; each returns the recipe of a loader
(:class:`~stoker.runtime.dataset.LoaderDataset`) that ``get_loader`` (:mod:`stoker.api.loaders`)
runs.
"""

from __future__ import annotations

import warnings
from typing import Any

from stoker.errors import ConfigError
from stoker.flavors.val_datasets import SourceDatasetFactory, per_source, restrict_sources
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.metadataset import Metadataset
from stoker.model.logical_workers import stride_of, virtual_workers_of
from stoker.model.task import DefaultTaskEncoder, ErrorPolicy, TaskEncoder, uses_grouping
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.pack_groups import GroupSizes
from stoker.plan import default_virtual_workers
from stoker.plan.order import combine_multipliers
from stoker.runtime.dataset import LoaderDataset
from stoker.sources.blender import Blender
from stoker.sources.blending import load_sources

#: Defaults of ``get_train_dataset`` where Energon requires the argument: the values its
#: documentation's examples use.
DEFAULT_SHUFFLE_BUFFER_SIZE = 100
DEFAULT_MAX_SAMPLES_PER_SEQUENCE = 100

_EXTRA_KWARGS = (
    "parallel_shard_iters",
    "dataset_config",
    "split_config",
    "subflavors",
    "virtual_workers",
    "allowed_modules",
    "allow_outside_paths",
    "error_policy",
    "trust_sample_loader",
    "sample_type",
    "subset",
)


def get_train_dataset(
    path: str | list[str] | Blender | Metadataset,
    *,
    split_part: str = "train",
    worker_config: WorkerConfig | None = None,
    batch_size: int | None,
    batch_drop_last: bool = False,
    packing_buffer_size: GroupSizes = None,
    group_batches: bool | None = None,
    shuffle_buffer_size: GroupSizes = DEFAULT_SHUFFLE_BUFFER_SIZE,
    max_samples_per_sequence: int | None = DEFAULT_MAX_SAMPLES_PER_SEQUENCE,
    virtual_epoch_length: int = 0,
    shuffle_over_epochs_multiplier: int | None = 1,
    task_encoder: TaskEncoder[Any, Any, Any, Any] = DefaultTaskEncoder(),  # noqa: B008
    repeat: bool = True,
    **kwargs: Any,
) -> LoaderDataset:
    """The training split of a dataset: shuffled, repeating, batched (Energon's signature).

    Args:
        path: A prepared dataset folder, an indexed ``.jsonl`` file, a token ``.bin``, a Parquet
            folder, one ``.parquet`` file or a list of them.
        worker_config: Rank, world size and dataloader workers (None:
            ``WorkerConfig.default_worker_config()``: ``torch.distributed``'s rank and world
            size, else 0 of 1, and 4 workers).
        batch_size: Samples per batch (None: yield samples unbatched).
        packing_buffer_size: Pack samples with the task encoder's ``select_samples_to_pack`` /
            ``pack_selected_samples``, choosing from this many buffered samples (None: off); or
            a dict per packing group (a metadataset's ``group:``; key None: the default group).
            See ``docs/packing.md``.
        group_batches: Batch by ``task_encoder.batch_group_criterion(sample) -> (key, size)``
            (None: when the task encoder overrides it, as in Energon; True/False: force).
        shuffle_buffer_size: Window over sample references that is shuffled (0/None: off;
            default 100, the value of Energon's documented examples; Energon requires it); or a
            dict per packing group, as ``packing_buffer_size``.
        max_samples_per_sequence: Longest run of consecutive samples read from one shard
            (None: whole shards; default 100, as Energon's documented examples).
        virtual_epoch_length: If > 0, each ``for`` loop over the loader stops after this many
            batches and the next one continues where it stopped.
        shuffle_over_epochs_multiplier: Shuffle shard slices over this many epochs (-1: sample
            slices with replacement; None: slices in order, as in Energon).
        repeat: Loop forever over epochs (False: one epoch per ``for`` loop).
        **kwargs: ``parallel_shard_iters`` (default 16), ``dataset_config``, ``split_config``,
            ``subflavors``, ``virtual_workers`` (streams the plan is defined over; fix it to
            resume on other cluster sizes), ``allowed_modules`` (modules whose classes a
            dataset.yaml may name besides Sample/factory subclasses; also the comma-separated
            ``STOKER_ALLOWED_MODULES``), ``error_policy``, ``trust_sample_loader`` (run a
            ``sample_loader.py`` shipped with the data; also ``STOKER_TRUST_SAMPLE_LOADER=1``),
            ``sample_type`` (the samples must be of this class or a subclass, as in Energon),
            ``allow_outside_paths`` (let ``.nv-meta`` name shards outside the dataset folder;
            also ``STOKER_ALLOW_OUTSIDE_PATHS=1``).
    """
    return _dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        task_encoder=task_encoder,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        group_batches=group_batches,
        training=True,
        repeat=repeat,
        virtual_epoch_length=virtual_epoch_length,
        shuffle_buffer_size=shuffle_buffer_size,
        max_samples_per_sequence=max_samples_per_sequence,
        # None: slices in order, as in Energon (stoker's plan calls that multiplier 0)
        shuffle_over_epochs_multiplier=combine_multipliers(shuffle_over_epochs_multiplier, 1),
        **kwargs,
    )


def get_val_dataset(
    path: str | list[str] | Blender | Metadataset,
    *,
    split_part: str = "val",
    worker_config: WorkerConfig | None = None,
    batch_size: int,
    batch_drop_last: bool = False,
    packing_buffer_size: GroupSizes = None,
    group_batches: bool | None = None,
    limit: int | None = None,
    task_encoder: TaskEncoder[Any, Any, Any, Any] = DefaultTaskEncoder(),  # noqa: B008
    **kwargs: Any,
) -> LoaderDataset:
    """The validation (or test) split: in order, one pass, at most ``limit`` batches per rank.

    ``packing_buffer_size`` and ``group_batches`` as in :func:`get_train_dataset`.
    """
    return _dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        task_encoder=task_encoder,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        group_batches=group_batches,
        training=False,
        repeat=False,
        limit=limit,
        **kwargs,
    )


def get_val_datasets(
    path: str | list[str] | Blender | Metadataset,
    *,
    split_part: str = "val",
    worker_config: WorkerConfig | None = None,
    batch_size: int,
    batch_drop_last: bool = False,
    packing_buffer_size: GroupSizes = None,
    limit: int | None = None,
    task_encoder: TaskEncoder[Any, Any, Any, Any] = DefaultTaskEncoder(),  # noqa: B008
    **kwargs: Any,
) -> list[tuple[LoaderDataset, SourceDatasetFactory]]:
    """One validation dataset per source of ``path`` (each dataset of a metadataset's split),
    with the factory of that source (its ``subflavors``, ``paths``, ``len()``), as Energon.

    Arguments as :func:`get_val_dataset`; ``limit`` applies to each dataset.

    Example:
        >>> for val, source in get_val_datasets("mix.yaml", worker_config=wc, batch_size=4):
        ...     print(source.subflavors, len(val))
        {'source': 'coco'} 3
        {} 3
    """
    dataset = get_val_dataset(
        path,
        split_part=split_part,
        worker_config=worker_config,
        batch_size=batch_size,
        batch_drop_last=batch_drop_last,
        packing_buffer_size=packing_buffer_size,
        limit=limit,
        task_encoder=task_encoder,
        **kwargs,
    )
    return per_source(dataset)


_DECODER_KWARGS = ("image_decode", "av_decode", "video_decode_audio")


def _apply_deprecated_decoder_kwargs(
    kwargs: dict[str, Any], task_encoder: TaskEncoder[Any, Any, Any, Any]
) -> None:
    """Energon's old ``image_decode=...`` style arguments: set the task encoder's decoder."""
    given = {k: kwargs.pop(k) for k in (*_DECODER_KWARGS, "auto_decode", "handler") if k in kwargs}
    if not given:
        return
    warnings.warn(
        f"{', '.join(sorted(given))} on get_*_dataset are deprecated (as in Energon); set "
        "task_encoder.decoder = SampleDecoder(...) instead (or decoder = None for raw bytes).",
        DeprecationWarning,
        stacklevel=4,
    )
    if given.get("auto_decode") is False:
        task_encoder.decoder = None
    elif any(k in given for k in _DECODER_KWARGS):
        task_encoder.decoder = SampleDecoder(**{k: given[k] for k in _DECODER_KWARGS if k in given})


def _dataset(
    path: str | list[str] | Blender | Metadataset,
    *,
    split_part: str,
    worker_config: WorkerConfig | None,
    dataset_config: str | None = None,
    split_config: str | None = None,
    subflavors: dict[str, Any] | None = None,
    subset: Any = None,
    allowed_modules: tuple[str, ...] = (),
    virtual_workers: int | None = None,
    parallel_shard_iters: int | None = None,
    error_policy: ErrorPolicy | None = None,
    trust_sample_loader: bool = False,
    sample_type: type | None = None,
    allow_outside_paths: bool | None = None,
    **options: Any,
) -> LoaderDataset:
    if worker_config is None:
        worker_config = WorkerConfig.default_worker_config()
    _apply_deprecated_decoder_kwargs(options, options["task_encoder"])
    options["group_batches"] = uses_grouping(options["task_encoder"], options["group_batches"])
    unknown = sorted(set(options) - set(LoaderDataset.__dataclass_fields__))
    if unknown:
        raise ConfigError(
            f"unknown argument(s) {', '.join(unknown)}.",
            hint=f"stoker also accepts: {', '.join(_EXTRA_KWARGS)}.",
        )
    sources, blend = load_sources(
        path
        if isinstance(path, Blender | Metadataset)
        else [str(p) for p in path]  # .parquet files
        if isinstance(path, list | tuple)
        else str(path),
        split_part=split_part,
        training=options.get("training", True),
        split_config=split_config or DEFAULT_SPLIT_CONFIG,
        dataset_config=dataset_config or DEFAULT_DATASET_YAML,
        subflavors=subflavors,
        allowed_modules=allowed_modules,
        trust_sample_loader=trust_sample_loader,
        sample_type=sample_type,
        allow_outside_paths=allow_outside_paths,
    )
    if subset is not None:
        sources = restrict_sources(sources, subset, path)
    return LoaderDataset(
        sources=sources,
        blend=blend,
        worker_config=worker_config,
        virtual_workers=virtual_workers
        or virtual_workers_of(worker_config)  # Energon's logical_workers (#236)
        or default_virtual_workers(worker_config.world_size, worker_config.num_workers),
        fanout=1 if virtual_workers else stride_of(worker_config),  # #236's striding
        virtual_workers_defaulted=virtual_workers is None and worker_config.logical_workers is None,
        parallel_shard_iters=parallel_shard_iters or 16,
        error_policy=error_policy or ErrorPolicy.from_handler(worker_config.global_error_handler),
        **options,
    )
