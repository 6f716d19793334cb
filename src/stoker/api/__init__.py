"""Energon's entry points: ``get_train_dataset``, ``get_val_dataset(s)``, ``get_loader``.

Same names and keyword arguments as ``megatron.energon``, so switching is a change of import::

    from stoker import WorkerConfig, get_loader, get_train_dataset

    ds = get_train_dataset(
        "/data/coco-wds",
        worker_config=WorkerConfig.default_worker_config(num_workers=2),
        batch_size=32,
        shuffle_buffer_size=100,
        max_samples_per_sequence=100,
    )
    for batch in get_loader(ds):
        ...

The dataset functions are in :mod:`stoker.api.datasets`, the loader functions in
:mod:`stoker.api.loaders`; ``stoker`` exports them all.
"""

from __future__ import annotations

from stoker.api.datasets import (
    DEFAULT_MAX_SAMPLES_PER_SEQUENCE,
    DEFAULT_SHUFFLE_BUFFER_SIZE,
    get_train_dataset,
    get_val_dataset,
    get_val_datasets,
)
from stoker.api.loaders import get_loader, get_savable_loader

__all__ = [
    "DEFAULT_MAX_SAMPLES_PER_SEQUENCE",
    "DEFAULT_SHUFFLE_BUFFER_SIZE",
    "get_loader",
    "get_savable_loader",
    "get_train_dataset",
    "get_val_dataset",
    "get_val_datasets",
]
