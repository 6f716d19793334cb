"""What to use instead of an Energon name or module path that stoker does not serve.

``HINTS`` is keyed by a name, or by a full module path; an ``ImportError`` raised by the alias ends
with the hint (:func:`stoker.energon_alias.modules.missing_message`).

Example:
    >>> HINTS["SampleIndex"]
    'an Energon-internal counter; stoker.Loader saves its position itself'
"""

from __future__ import annotations

from stoker.energon_alias.table import ROOT, words

# What to use instead of a name stoker does not serve (keyed by name, or by module path).
HINTS: dict[str, str] = {
    "DatasetLoader": "pass the dataset path (or metadataset YAML) to stoker.get_train_dataset",
    "DatasetLoaderInterface": "stoker.load_dataset(path) returns what stoker.get_*_dataset take",
    "EmptyDatasetError": "stoker raises stoker.ConfigError naming the empty split",
    "AVWebdatasetDecoder": "use stoker.SampleDecoder(av_decode='AVDecoder')",
    "DatasetBlendMode": "stoker.traverse_metadataset reports each dataset's weight or repetitions",
    "PinMemoryMixin": "stoker pins whole batches: pass pin_memory=True to get_loader",
    "add_sample_restore_key": "stoker fills __restore_key__ itself; nothing to call",
    "set_sample_restore_key": "stoker fills __restore_key__ itself; nothing to call",
    "legacy_handler": "pass a handler with Energon's current signature",
    "WebdatasetMeta": "read a prepared dataset's metadata with `stoker info PATH --json`",
    "DEFAULT_DECODER": "use stoker.SampleDecoder() (its defaults are Energon's)",
    "get_source_info": "read sample.__sources__",
    "TraversedDatasetReference": "use stoker.traverse_metadataset",
    "SampleIndex": "an Energon-internal counter; stoker.Loader saves its position itself",
    "MediaFilterConfig": "use stoker.media.extract.MediaFilter (same fields, string strategy)",
    "MediaFilterStrategy": "use the strategy's name: MediaFilter('EXTENSION' | 'HEADER' | 'GLOB')",
    "prepare_filesystem_dataset": "use `stoker prepare-media` (stoker.media.prepare.prepare_media)",
    **dict.fromkeys(
        words(
            "AuxDatasetReference AuxFilesystemReference BlendDatasetReference DatasetReference "
            "JoinDatasetReference MetadatasetBlend MetadatasetBlendEpochized MetadatasetJoin "
            "BlendEpochizedDatasetReference BlendJoinDatasetReference Subset"
        ),
        "Energon's metadataset object model; stoker reads the same YAML into "
        "stoker.metadataset.nodes (DatasetRef, AuxRef, BlendNode, JoinNode)",
    ),
    "FlexState": "stoker's state is a plain dict: loader.save_state_rank()",
    "NVDATASET_CACHE_DIR": "stoker reads the NVDATASET_CACHE_DIR environment variable",
    f"{ROOT}.transforms": "stoker does not depend on torchvision: apply torchvision transforms "
    "inside your TaskEncoder.encode_sample",
    "SqliteIndexReader": "Energon-internal SQLite index reader; stoker reads the index that "
    "stoker.prepare_dataset writes itself",
    f"{ROOT}.flavors.webdataset.sample_loader": "Energon-internal; stoker's state is a plain dict",
    f"{ROOT}.rng": "Energon-internal RNG state; stoker's state is a plain dict",
    f"{ROOT}.state": "Energon-internal state classes; stoker's state is a plain dict",
}

GENERIC_HINT = "not in stoker (yet); docs/energon.md lists what stoker offers instead"
