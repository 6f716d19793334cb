"""Megatron token datasets written by megatron-core's own ``IndexedDatasetBuilder``, and its
``IndexedDataset`` to read them back, for the ``.bin``/``.idx`` tests."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np


def megatron_datasets() -> Any:
    """``megatron.core.datasets.indexed_dataset`` (importing megatron-core warns that Transformer
    Engine and Apex are missing: irrelevant to its datasets)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset

    return indexed_dataset


def write_tokens(
    prefix: Path, dtype: Any, documents: int, seed: int = 0, eod: int | None = None
) -> Path:
    """``prefix.bin`` / ``prefix.idx``: ``documents`` documents of 1-3 sequences of 0-40 tokens
    (``eod``: appended to each document's last sequence), written by megatron-core."""
    import torch

    rng = np.random.default_rng(seed)
    builder = megatron_datasets().IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
    top = min(int(np.iinfo(dtype).max) if np.dtype(dtype).kind in "iu" else 1000, 30000)
    for _ in range(documents):
        parts = int(rng.integers(1, 4))
        for p in range(parts):
            tokens = rng.integers(0, top, int(rng.integers(0 if p else 1, 41)))
            if eod is not None and p == parts - 1:
                tokens = np.append(tokens, eod)
            builder.add_item(torch.from_numpy(tokens.astype(np.int64)))
        builder.end_document()
    builder.finalize(f"{prefix}.idx")
    return prefix


def reference(prefix: Path) -> Any:
    """megatron-core's reading of the dataset ``prefix`` (memory-mapped)."""
    return megatron_datasets().IndexedDataset(str(prefix))
