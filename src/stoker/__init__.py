"""stoker: keeps the GPUs of large multimodal training runs fed.

An Energon-compatible loader for WebDataset shards and indexed JSONL.
"""

from __future__ import annotations

from stoker.errors import ConfigError, FormatError, StokerError, StorageError
from stoker.format.prepare import PrepareReport, prepare_dataset

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "FormatError",
    "PrepareReport",
    "StokerError",
    "StorageError",
    "__version__",
    "prepare_dataset",
]
