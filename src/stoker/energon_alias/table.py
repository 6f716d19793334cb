"""Energon 7.4.1's public module paths and names, and where stoker serves each one.

``MODULES`` maps a ``megatron.energon...`` module path to ``{name: target}``; a target is
``"stoker.module:attr"``, or several separated by ``|`` (the first that resolves wins, so a name
can point at where stoker exports it and at the module that defines it). ``HINTS`` says what to
use instead of a name (or module path) stoker does not serve.

Example:
    >>> MODULES["megatron.energon.task_encoder.base"]["stateless"]
    'stoker:stateless'
"""

from __future__ import annotations

from stoker.energon_alias.next_release import NEXT_ELSEWHERE, NEXT_SAME_NAME

ROOT = "megatron.energon"


def words(text: str) -> tuple[str, ...]:
    """The names in ``text``, split at white space."""
    return tuple(text.split())


# Energon 7.4.1's `megatron.energon.__all__` (96 names with __version__).
ENERGON_ALL: tuple[str, ...] = words(
    """
    AugmentTaskEncoder BaseCoreDatasetFactory BaseWebdatasetFactory Batch BatchDataset
    BlendDataset CachePool CaptioningSample CaptioningWebdataset ConcatDataset Cooker
    CrudeJsonlDatasetFactory CrudeSample CrudeWebdataset DatasetLoader DatasetLoaderInterface
    DecodeFileStore DefaultCrudeJsonlDatasetFactory DefaultDecoderWebdatasetFactory
    DefaultGenericWebdatasetFactory DefaultTaskEncoder DirectLazy EpochizeDataset FileCacheLazy
    FileStore FileStoreCachePool FileStoreDecoder FilterDataset GcDataset GroupBatchDataset
    ImageClassificationSample ImageClassificationWebdataset ImageSample ImageWebdataset
    InterleavedSample InterleavedWebdataset IterMapDataset JoinedWebdatasetFactory Lazy
    LimitDataset LogSampleDataset MapDataset Metadataset MetadatasetV2 MixBatchDataset MockLazy
    MultiChoiceVQASample MultiChoiceVQAWebdataset NoCachePool OCRSample OCRWebdataset
    PackingDataset PrimaryFileStore RepeatDataset Sample SampleDecoder SavableDataLoader
    SavableDataset ShuffleBufferDataset SimilarityInterleavedSample
    SimilarityInterleavedWebdataset SkipSample SourceInfo StandardWebdatasetFactory
    SystemFileStore TaskEncoder TextSample TextWebdataset VQAOCRWebdataset VQASample
    VQAWebdataset VidQASample VidQAWebdataset WorkerConfig __version__ basic_sample_keys
    batch_list batch_pad_stack batch_stack concat_pad cooker edataclass generic_batch
    generic_concat get_loader get_savable_loader get_train_dataset get_val_dataset
    get_val_datasets homogeneous_concat_mix load_dataset log_exception prepare_metadataset
    reraise_exception stateless traverse_metadataset
    """
)

_FLAVORS = (
    "Captioning Image ImageClassification Interleaved MultiChoiceVQA OCR SimilarityInterleaved "
    "Text VidQA VQA VQAOCR"
)
_FLAVOR_MODULES = dict(
    zip(
        words(_FLAVORS),
        words(
            "captioning image image_classification interleaved multichoice_vqa ocr "
            "similarity_interleaved text vid_qa vqa vqa_and_ocr"
        ),
        strict=True,
    )
)
_WRAPPERS = {
    "batch_dataset": "BatchDataset",
    "blend_dataset": "BlendDataset",
    "concat_dataset": "ConcatDataset",
    "epochize_dataset": "EpochizeDataset",
    "filter_dataset": "FilterDataset",
    "gc_dataset": "GcDataset",
    "group_batch_dataset": "GroupBatchDataset",
    "iter_map_dataset": "IterMapDataset",
    "limit_dataset": "LimitDataset",
    "log_sample_dataset": "LogSampleDataset",
    "map_dataset": "MapDataset",
    "mix_batch_dataset": "MixBatchDataset concat_pad generic_concat homogeneous_concat_mix",
    "packing_dataset": "PackingDataset PackedSamplesOutput PartialSample",
    "repeat_dataset": "RepeatDataset",
    "shuffle_buffer_dataset": "ShuffleBufferDataset",
    "skip": "SkipSample",
}
_CONFIG = "stoker.energon_alias.config"
_INDEX_WRITER = "stoker.energon_alias.index_writer"
_EPATH = "stoker:EPath|stoker.storage.epath:EPath"
_TOOLS = "stoker.cli.energon_tools"
_PROFILE = "stoker:DEFAULT_PROFILE_NAME|stoker.storage.msc:DEFAULT_PROFILE_NAME"

# Module path (relative to megatron.energon) -> names served as `stoker.<same name>`.
_SAME_NAME: dict[str, str] = {
    # Energon's next release (pull requests #228/#239) adds PackedSamplesOutput, PartialSample.
    "": " ".join(ENERGON_ALL) + " VQAOCRSample PackedSamplesOutput PartialSample",
    "task_encoder": "AugmentTaskEncoder Batch Cooker DefaultTaskEncoder TaskEncoder "
    "basic_sample_keys batch_list batch_pad_stack batch_stack cooker generic_batch "
    "get_train_dataset get_val_dataset get_val_datasets stateless",
    "task_encoder.base": "AugmentTaskEncoder Batch DefaultTaskEncoder TaskEncoder WorkerConfig "
    "batch_list batch_pad_stack batch_stack generic_batch get_stateless stateless",
    "task_encoder.cooking": "Cooker basic_sample_keys cooker",
    "task_encoder.loader": "get_train_dataset get_val_dataset get_val_datasets",
    "flavors": "AVData AVDecoder BaseCoreDatasetFactory BaseWebdatasetFactory "
    "CrudeJsonlDatasetFactory CrudeSample CrudeWebdataset DefaultCrudeJsonlDatasetFactory "
    "DefaultDecoderWebdatasetFactory DefaultGenericWebdatasetFactory JoinedWebdatasetFactory "
    "Sample SampleDecoder SavableDataset StandardWebdatasetFactory "
    + " ".join(f"{f}Sample {f}Webdataset" for f in _FLAVORS.split()),
    "flavors.base_dataset": "BaseCoreDatasetFactory Sample SavableDataset",
    "flavors.webdataset": "AVData AVDecoder BaseWebdatasetFactory DefaultDecoderWebdatasetFactory "
    "DefaultGenericWebdatasetFactory JoinedWebdatasetFactory SampleDecoder "
    "StandardWebdatasetFactory",
    "flavors.webdataset.base_webdataset": "BaseWebdatasetFactory",
    "flavors.webdataset.default_decoder_webdataset": "DefaultDecoderWebdatasetFactory",
    "flavors.webdataset.default_generic_webdataset": "DefaultGenericWebdatasetFactory",
    "flavors.webdataset.standard_webdataset": "StandardWebdatasetFactory",
    "flavors.webdataset.joined_webdataset": "JoinedWebdatasetFactory",
    "flavors.webdataset.sample_decoder": "SampleDecoder",
    "flavors.crude": "CrudeSample CrudeWebdataset",
    "flavors.jsonl": "CrudeJsonlDatasetFactory DefaultCrudeJsonlDatasetFactory",
    "flavors.jsonl.crude_jsonl_dataset": "CrudeJsonlDatasetFactory DefaultCrudeJsonlDatasetFactory",
    **{f"flavors.{m}": f"{f}Sample {f}Webdataset" for f, m in _FLAVOR_MODULES.items()},
    "edataclass": "edataclass",
    "errors": "SkipSample log_exception reraise_exception",
    "source_info": "SourceInfo",
    "dataset_config": "get_dataset_from_config",
    "loader": "get_loader get_savable_loader",
    "savable_loader": "BasicDataLoader SavableDataLoader",
    "worker": "WorkerConfig",
    "metadataset": "DatasetLoader DatasetLoaderInterface Metadataset MetadatasetV2 load_dataset "
    "prepare_metadataset traverse_metadataset",
    "metadataset.loader": "load_dataset prepare_metadataset traverse_metadataset",
    "metadataset.loader_interface": "DatasetLoaderInterface",
    "metadataset.metadataset": "Metadataset",
    "metadataset.metadataset_v2": "MetadatasetV2",
    "metadataset.dataset_loader": "DatasetLoader",
    "wrappers": " ".join(_WRAPPERS.values()),
    **{f"wrappers.{m}": names for m, names in _WRAPPERS.items()},
    "cache": "CachePool DecodeFileStore DirectLazy FileCacheLazy FileStore FileStoreCachePool "
    "FileStoreDecoder Lazy MockLazy NoCachePool PrimaryFileStore SystemFileStore",
    "cache.base": "CachePool FileStore FileStoreDecoder Lazy MockLazy PrimaryFileStore",
    "cache.file_cache_pool": "FileCacheLazy FileStoreCachePool",
    "cache.file_store": "DecodeFileStore SystemFileStore",
    "cache.no_cache": "DirectLazy NoCachePool",
    "av": "AVData AVDecoder get_clips_uniform get_single_frames_uniform",
    "av.av_data": "AVData",
    "av.av_decoder": "AVDecoder",
    "av.utils": "get_clips_uniform get_single_frames_uniform",
    "media": "AVMetadata ImageMetadata",
    "media.metadata": "AVMetadata ImageMetadata",
}

# Module path -> names served from another place in stoker.
_ELSEWHERE: dict[str, dict[str, str]] = {
    "": {
        "__version__": f"{_CONFIG}:ENERGON_VERSION",
        **{n: f"stoker.energon_alias.loaders:{n}" for n in ("get_loader", "get_savable_loader")},
    },
    "loader": {
        n: f"stoker.energon_alias.loaders:{n}" for n in ("get_loader", "get_savable_loader")
    },
    "task_encoder.base": {
        **{
            t: f"stoker.model.task:{t}"
            for t in ("T_sample", "T_encoded_sample", "T_raw_batch", "T_batch")
        },
        "get_failure_tolerance": "stoker.pipeline.tolerance:get_failure_tolerance",
    },
    "flavors.base_dataset": {"ExtendableDataclassMixin": "stoker.model.samples:Extendable"},
    "flavors.webdataset": {
        "AVDecoderType": "stoker.pipeline.decode:AVDecoderType",
        "ImageDecoderType": "stoker.pipeline.decode:ImageDecoderType",
        "EmptyDatasetError": "stoker:EmptyDatasetError|stoker.flavors:EmptyDatasetError",
        "MAIN_FOLDER_NAME": f"{_CONFIG}:MAIN_FOLDER_NAME",
    },
    "flavors.webdataset.empty_dataset_error": {
        "EmptyDatasetError": "stoker:EmptyDatasetError|stoker.flavors:EmptyDatasetError",
    },
    "flavors.webdataset.config": {
        name: f"{_CONFIG}:{name}"
        for name in words(
            "MAIN_FOLDER_NAME INFO_JSON_FILENAME INFO_YAML_FILENAME INDEX_SQLITE_FILENAME "
            "INDEX_UUID_FILENAME SPLIT_YAML_FILENAME JOIN_INDEX_FILENAME"
        )
    },
    "flavors.webdataset.indexing": {
        "MissingSamplesTableError": "stoker:MissingSamplesTableError"
        "|stoker.errors:MissingSamplesTableError",
        "SqliteIndexWriter": f"{_INDEX_WRITER}:SqliteIndexWriter",
        "DuplicateSampleKeyError": f"{_INDEX_WRITER}:DuplicateSampleKeyError",
    },
    "flavors.webdataset.prepare": {
        name: f"{_INDEX_WRITER}:{name}" for name in ("IndexSample", "IndexSamplePart")
    },
    "flavors.webdataset.aggregator_pool": {
        name: f"{_INDEX_WRITER}:{name}" for name in ("AggregatorPool", "BaseAggregator")
    },
    "epathlib": {"EPath": _EPATH, "DEFAULT_PROFILE_NAME": _PROFILE},
    "epathlib.epath": {
        "EPath": _EPATH,
        "DEFAULT_PROFILE_NAME": _PROFILE,
        "NVDATASET_CACHE_DIR": "stoker.storage.epath:NVDATASET_CACHE_DIR",
    },
    "source_info": {"add_source_info": "stoker.sources.aux:add_source_info"},
    "dataset_config": {"load_config": "stoker.energon_alias.dataset_config:load_config"},
    "errors": {
        "FatalSampleError": "stoker.errors:FatalSampleError",
        "SampleException": "stoker.errors:SampleException",
        "SYSTEM_EXCEPTIONS": "stoker.pipeline.sample_failure:SYSTEM_EXCEPTIONS",
    },
    "metadataset.loader_interface": {
        "DatasetBlendMode": "stoker:DatasetBlendMode|stoker.metadataset:DatasetBlendMode",
        "LoadedDataset": "stoker.metadataset:LoadedDataset",
        "LoadedDatasetList": "stoker.metadataset:LoadedDatasetList",
        "TraversedDatasetReference": "stoker:TraversedDatasetReference"
        "|stoker.metadataset:TraversedDatasetReference",
    },
    "wrappers.watchdog_dataset": {
        "WatchdogDataset": "stoker:WatchdogDataset|stoker.wrappers:WatchdogDataset"
    },
    "wrappers.base": {
        "BaseWrapperDataset": "stoker:BaseWrapperDataset|stoker.wrappers:BaseWrapperDataset",
        "get_sample_restore_key": "stoker.wrappers:get_sample_restore_key",
    },
    "cache.base": {"FileStoreWrapper": "stoker.sources.aux:FileStoreWrapper"},
    "cache.file_store": {
        "WebdatasetFileStore": "stoker.sources.aux:WebdatasetFileStore",
        "JsonlFileStore": "stoker.sources.aux:JsonlFileStore",
    },
    "av": {"AVWebdatasetDecoder": "stoker:AVWebdatasetDecoder"},
    "av.av_decoder": {"AVWebdatasetDecoder": "stoker:AVWebdatasetDecoder"},
    "metadataset.metadataset_v2": {
        "AuxFilesystemReference": "stoker.metadataset.nodes:AuxRef",
    },
    "av.av_reader": {
        "AVProbeIndex": "stoker.media.probe_index:AVProbeIndex",
        "AVProbeIndexEntry": "stoker.media.probe_index:AVProbeIndexEntry",
    },
    "media": {
        "serialize_media_metadata": "stoker.media.metadata:serialize_media_metadata",
        "deserialize_media_metadata": "stoker.media.metadata:deserialize_media_metadata",
    },
    "media.metadata": {
        "serialize_media_metadata": "stoker.media.metadata:serialize_media_metadata",
        "deserialize_media_metadata": "stoker.media.metadata:deserialize_media_metadata",
    },
    "media.extractor": {
        "MediaFilterConfig": "stoker:MediaFilterConfig|stoker.media.extract:MediaFilterConfig",
        "MediaFilterStrategy": "stoker:MediaFilterStrategy"
        "|stoker.media.extract:MediaFilterStrategy",
    },
    "media.filesystem_prepare": {
        "prepare_filesystem_dataset": "stoker:prepare_filesystem_dataset"
        "|stoker.media.prepare:prepare_filesystem_dataset",
    },
    "sample_utils": {
        "format_sample_compact": "stoker.model.sample_format:format_sample_compact",
        "format_sample_detailed": "stoker.model.sample_format:format_sample_detailed",
        "default_get_batch_keys": "stoker.model.sample_format:default_get_batch_keys",
    },
    "fork_hook": {
        name: f"stoker.energon_alias.fork_hook:{name}"
        for name in words(
            "DataclassForkMixin ForkMixin WeakCallbacks after_in_child_fork_hook "
            "after_in_parent_fork_hook before_fork_hook"
        )
    },
    "tools": {},
    "tools.prepare": {"command": f"{_TOOLS}:prepare_command"},
    "tools.prepare_media": {"command": f"{_TOOLS}:prepare_media_command"},
    "tools.lint": {"command": f"{_TOOLS}:lint_command"},
    "tools.info": {"command": f"{_TOOLS}:info_command"},
    "tools.preview": {"command": f"{_TOOLS}:preview_command"},
    "tools.checkpoint": {
        "command": f"{_TOOLS}:checkpoint_command",
        "command_redist": f"{_TOOLS}:command_redist",
        "command_info": f"{_TOOLS}:command_info",
    },
    "tools.analyze_debug": {"command": f"{_TOOLS}:analyze_debug_command"},
    "tools.mount": {"command": f"{_TOOLS}:mount_command"},
    "cli": {},
    "cli.main": {
        "main": f"{_TOOLS}:main",
        **{
            f"{tool}_command": f"{_TOOLS}:{tool}_command"
            for tool in words(
                "analyze_debug checkpoint info lint mount prepare prepare_media preview"
            )
        },
    },
}


# Module path -> Energon names stoker deliberately does not serve (target NOT_SERVED); importing
# one fails with its entry in HINTS.
NOT_SERVED = "-"
_NOT_SERVED: dict[str, str] = {
    "flavors.base_dataset": "PinMemoryMixin add_sample_restore_key set_sample_restore_key "
    "legacy_handler",
    "flavors.webdataset": "WebdatasetMeta",
    "flavors.webdataset.sample_decoder": "DEFAULT_DECODER",
    "source_info": "get_source_info",
    "metadataset.metadataset_v2": "AuxDatasetReference "
    "BlendDatasetReference DatasetReference JoinDatasetReference MetadatasetBlend "
    "MetadatasetBlendEpochized MetadatasetJoin BlendEpochizedDatasetReference "
    "BlendJoinDatasetReference Subset",
    "wrappers.base": "SampleIndex",
    "flavors.webdataset.indexing": "SqliteIndexReader",
}


def _build() -> dict[str, dict[str, str]]:
    modules: dict[str, dict[str, str]] = {}
    every = {*_SAME_NAME, *_ELSEWHERE, *_NOT_SERVED, *NEXT_SAME_NAME, *NEXT_ELSEWHERE}
    for relative in sorted(every):
        path = f"{ROOT}.{relative}" if relative else ROOT
        names = dict.fromkeys(words(_NOT_SERVED.get(relative, "")), NOT_SERVED)
        names |= {n: f"stoker:{n}" for n in words(_SAME_NAME.get(relative, ""))}
        names |= {n: f"stoker:{n}" for n in words(NEXT_SAME_NAME.get(relative, ""))}
        elsewhere = {**_ELSEWHERE.get(relative, {}), **NEXT_ELSEWHERE.get(relative, {})}
        modules[path] = {**names, **elsewhere}
    return modules


MODULES: dict[str, dict[str, str]] = _build()
