"""stoker: keeps the GPUs of large multimodal training runs fed.

An Energon-compatible loader for WebDataset shards and indexed JSONL: change
``from megatron.energon import ...`` to ``from stoker import ...`` and keep your data.

Example:
    >>> from stoker import WorkerConfig, get_loader, get_train_dataset
    >>> ds = get_train_dataset(
    ...     "coco-wds",
    ...     worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
    ...     batch_size=32,
    ...     shuffle_buffer_size=100,
    ...     max_samples_per_sequence=100,
    ... )
    >>> for step, batch in enumerate(get_loader(ds)):
    ...     print(batch.image.shape, len(batch.caption))
    ...     if step == 1:
    ...         break
    torch.Size([32, 3, 48, 64]) 32
    torch.Size([32, 3, 48, 64]) 32
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__version__ = "0.1.0"

# Public names resolve on first use, so that `import stoker` (and the CLI) stays light: torch is
# imported only when a loader, sample type or decoder is actually used.
_EXPORTS: dict[str, str] = {
    "BaseCoreDatasetFactory": "stoker.flavors",
    "BaseWebdatasetFactory": "stoker.flavors",
    "BinIdxDatasetFactory": "stoker.flavors",
    "CaptioningWebdataset": "stoker.flavors",
    "CrudeJsonlDatasetFactory": "stoker.flavors",
    "CrudeWebdataset": "stoker.flavors",
    "DefaultBinIdxDatasetFactory": "stoker.flavors",
    "DefaultCrudeJsonlDatasetFactory": "stoker.flavors",
    "DefaultDecoderWebdatasetFactory": "stoker.flavors",
    "DefaultGenericWebdatasetFactory": "stoker.flavors",
    "ImageClassificationWebdataset": "stoker.flavors",
    "ImageWebdataset": "stoker.flavors",
    "InterleavedWebdataset": "stoker.flavors",
    "JoinedWebdatasetFactory": "stoker.flavors",
    "MultiChoiceVQAWebdataset": "stoker.flavors",
    "OCRWebdataset": "stoker.flavors",
    "SimilarityInterleavedWebdataset": "stoker.flavors",
    "StandardWebdatasetFactory": "stoker.flavors",
    "TextWebdataset": "stoker.flavors",
    "VidQAWebdataset": "stoker.flavors",
    "VQAOCRWebdataset": "stoker.flavors",
    "VQAWebdataset": "stoker.flavors",
    "get_dataset_from_config": "stoker.flavors",
    "AVData": "stoker.media.av_data",
    "BatchDataset": "stoker.wrappers",
    "BlendDataset": "stoker.wrappers",
    "ConcatDataset": "stoker.wrappers",
    "EpochizeDataset": "stoker.wrappers",
    "FilterDataset": "stoker.wrappers",
    "GcDataset": "stoker.wrappers",
    "GroupBatchDataset": "stoker.wrappers",
    "IterMapDataset": "stoker.wrappers",
    "LimitDataset": "stoker.wrappers",
    "LogSampleDataset": "stoker.wrappers",
    "MapDataset": "stoker.wrappers",
    "PackingDataset": "stoker.wrappers",
    "RepeatDataset": "stoker.wrappers",
    "ShuffleBufferDataset": "stoker.wrappers",
    "WatchdogDataset": "stoker.wrappers",
    "BasicDataLoader": "stoker.runtime.savable_loader",
    "SavableDataLoader": "stoker.runtime.savable_loader",
    "reraise_exception": "stoker.pipeline.sample_failure",
    "log_exception": "stoker.pipeline.sample_failure",
    "edataclass": "stoker.model.dataclass_helpers",
    "AugmentTaskEncoder": "stoker.model.task",
    "AVDecoder": "stoker.media.av_decoder",
    "AVLimits": "stoker.media.limits",
    "AVMetadata": "stoker.media.metadata",
    "Blender": "stoker.sources.blender",
    "WeightSchedule": "stoker.plan.weights",
    "load_dataset": "stoker.flavors.load",
    "prepare_metadataset": "stoker.flavors.metadataset_tools",
    "traverse_metadataset": "stoker.flavors.metadataset_tools",
    "TraversedDatasetReference": "stoker.flavors.metadataset_tools",
    "Metadataset": "stoker.metadataset",
    "MixBatchDataset": "stoker.runtime.mix_batch",
    "Batch": "stoker.model.batch",
    "CachePool": "stoker.model.cache_pool",
    "DirectLazy": "stoker.model.cache_pool",
    "FileCacheLazy": "stoker.sources.file_cache_pool",
    "FileStoreCachePool": "stoker.sources.file_cache_pool",
    "FileStoreDecoder": "stoker.model.cache_pool",
    "MockLazy": "stoker.model.cache_pool",
    "CaptioningSample": "stoker.model.samples",
    "ConfigError": "stoker.errors",
    "MissingSampleIndexError": "stoker.errors",
    "MissingSamplesTableError": "stoker.errors",
    "PrepareLockedError": "stoker.errors",
    "DEFAULT_PROFILE_NAME": "stoker.storage.epath",
    "Cooker": "stoker.model.cooking",
    "CrudeSample": "stoker.model.samples",
    "DecodeFileStore": "stoker.sources.aux",
    "DefaultTaskEncoder": "stoker.model.task",
    "EPath": "stoker.storage.epath",
    "ErrorPolicy": "stoker.pipeline.skip_policy",
    "FileStore": "stoker.sources.aux",
    "FatalSampleError": "stoker.errors",
    "FormatError": "stoker.errors",
    "IgnoreSample": "stoker.model.task",
    "ImageMetadata": "stoker.media.metadata",
    "ImageClassificationSample": "stoker.model.samples",
    "ImageSample": "stoker.model.samples",
    "InterleavedSample": "stoker.model.samples",
    "Lazy": "stoker.model.cache_pool",
    "Loader": "stoker.runtime.loader",
    "LoaderDataset": "stoker.runtime.dataset",
    "MultiChoiceVQASample": "stoker.model.samples",
    "NoCachePool": "stoker.model.cache_pool",
    "OCRSample": "stoker.model.samples",
    "LoaderOptions": "stoker.storage.options",
    "PrepareReport": "stoker.format.pending",
    "PrimaryFileStore": "stoker.sources.aux",
    "Sample": "stoker.model.samples",
    "SampleDecoder": "stoker.pipeline.decode",
    "SampleError": "stoker.errors",
    "SimilarityInterleavedSample": "stoker.model.samples",
    "SkipSample": "stoker.pipeline.sample_failure",
    "PackedSamplesOutput": "stoker.pipeline.pack_output",
    "PartialSample": "stoker.pipeline.pack_partial",
    "SourceInfo": "stoker.model.samples",
    "StokerError": "stoker.errors",
    "StorageError": "stoker.errors",
    "SystemFileStore": "stoker.sources.aux",
    "TaskEncoder": "stoker.model.task",
    "TextSample": "stoker.model.samples",
    "VQAOCRSample": "stoker.model.samples",
    "VQASample": "stoker.model.samples",
    "VidQASample": "stoker.model.samples",
    "WorkerConfig": "stoker.model.worker_config",
    "basic_sample_keys": "stoker.model.cooking",
    "batch_list": "stoker.pipeline.batch",
    "batch_pad_stack": "stoker.pipeline.batch",
    "batch_stack": "stoker.pipeline.batch",
    "concat_pad": "stoker.pipeline.concat",
    "cooker": "stoker.model.cooking",
    "first_fit_decreasing": "stoker.pipeline.bins",
    "generic_batch": "stoker.pipeline.batch",
    "generic_concat": "stoker.pipeline.concat",
    "get_clips_uniform": "stoker.media.uniform",
    "get_loader": "stoker.api.loaders",
    "get_media_metadata": "stoker.media.lookup",
    "get_savable_loader": "stoker.api.loaders",
    "get_single_frames_uniform": "stoker.media.uniform",
    "get_stateless": "stoker.model.task",
    "get_train_dataset": "stoker.api.datasets",
    "get_val_dataset": "stoker.api.datasets",
    "get_val_datasets": "stoker.api.datasets",
    "homogeneous_concat_mix": "stoker.pipeline.concat",
    "prepare_dataset": "stoker.format.prepare",
    "register_decoder": "stoker.pipeline.decode",
    "stateless": "stoker.model.task",
    "LogicalWorkerAssignment": "stoker.model.logical_workers",
    "TokenBudgetPacker": "stoker.pipeline.token_packer",
    "get_skip_safe": "stoker.pipeline.seeds",
    "skip_safe": "stoker.pipeline.seeds",
    "token_window": "stoker.pipeline.token_packer",
}
_ALIASES = {
    "SavableDataset": "LoaderDataset",
    "MetadatasetV2": "Metadataset",
}  # Energon's name for what get_*_dataset return


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    if target not in _EXPORTS:
        raise AttributeError(f"module 'stoker' has no attribute {name!r}")
    try:
        module = importlib.import_module(_EXPORTS[target])
    except ModuleNotFoundError as e:
        from stoker.errors import MissingDependencyError

        missing = MissingDependencyError.from_import_error(e, f"stoker.{name}")
        if missing is None:
            raise
        raise missing from None
    value = getattr(module, target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


# Every public name: those of _EXPORTS, their Energon aliases, and __version__.
__all__ = sorted([*_EXPORTS, *_ALIASES, "__version__"])

# A process started by a program run under `python -m stoker.energon_alias` (or one that called
# stoker.energon_alias.install()) serves `megatron.energon` from stoker too, e.g. spawned workers.
if os.environ.get("STOKER_ENERGON_ALIAS") == "1":
    importlib.import_module("stoker.energon_alias").install_if_requested()
