"""Energon's dataset factories ("flavors"), backed by stoker's readers and plan.

A ``dataset.yaml`` names one of these (``__class__: CrudeWebdataset``), or a plain sample type
(then :class:`StandardWebdatasetFactory` loads it); client code subclasses them, e.g.
``class ChatMLWebdataset(DefaultDecoderWebdatasetFactory[ChatMLSample])``.
:func:`get_dataset_from_config` makes the factory of a prepared dataset; ``build()`` gives an
unbatched :class:`~stoker.LoaderDataset` to iterate with :func:`stoker.get_loader`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Resolved on first use: loading a dataset checks its classes (sources/allow.py) without importing
# the factories and their decoders (torch) unless the dataset names one.
_MODULES = {
    "BaseCoreDatasetFactory": "base",
    "BinIdxDatasetFactory": "binidx",
    "DefaultBinIdxDatasetFactory": "binidx",
    "get_dataset_from_config": "config",
    "DEFAULT_DECODER": "generic",
    "DefaultDecoderWebdatasetFactory": "generic",
    "DefaultGenericWebdatasetFactory": "generic",
    "StandardWebdatasetFactory": "generic",
    "JoinedWebdatasetFactory": "joined",
    "CrudeJsonlDatasetFactory": "jsonl",
    "DefaultCrudeJsonlDatasetFactory": "jsonl",
    "BaseWebdatasetFactory": "webdataset",
    "ShardInfo": "webdataset",
    "EmptyDatasetError": "webdataset",
    **dict.fromkeys(
        [
            "CaptioningWebdataset",
            "CrudeWebdataset",
            "ImageClassificationWebdataset",
            "ImageWebdataset",
            "InterleavedWebdataset",
            "MultiChoiceVQAWebdataset",
            "OCRWebdataset",
            "SimilarityInterleavedWebdataset",
            "TextWebdataset",
            "VidQAWebdataset",
            "VQAOCRWebdataset",
            "VQAWebdataset",
        ],
        "typed",
    ),
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module 'stoker.flavors' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"stoker.flavors.{_MODULES[name]}"), name)
    globals()[name] = value
    return value


__all__ = sorted(_MODULES)
