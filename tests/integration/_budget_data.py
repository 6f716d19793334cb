"""Shared by the token-budget packing tests and their gloo ranks: a JSONL dataset of long-tailed
sample lengths (lognormal, mean about 600, at most 8000 tokens) and a task encoder that packs it
with :class:`stoker.TokenBudgetPacker` into packs of 4096 tokens, each pack listing its parts as
``(sample id, first token, end token)``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from stoker import (
    DefaultTaskEncoder,
    TokenBudgetPacker,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    stateless,
    token_window,
)
from stoker.format.jsonl import prepare_jsonl
from stoker.runtime.loader import Loader

CAPACITY = 4096
BUFFER = 64


def write_lengths(path: Path, n: int, seed: int = 0) -> dict[int, int]:
    """``n`` JSONL lines ``{"id": i, "n": tokens}``, indexed; the lengths by id."""
    rng = np.random.default_rng(seed)
    sigma = 1.0
    raw = rng.lognormal(math.log(600) - sigma**2 / 2, sigma, n)
    lengths = np.clip(np.rint(raw), 1, 8000).astype(int).tolist()
    path.write_text("".join(json.dumps({"id": i, "n": k}) + "\n" for i, k in enumerate(lengths)))
    prepare_jsonl(str(path))
    return dict(enumerate(lengths))


def _tokens(sample: dict[str, Any]) -> int:
    return int(sample["n"])


class BudgetPacking(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Packs with the built-in token-budget packer; a pack is its parts."""

    packing_capacity = CAPACITY

    def __init__(self) -> None:
        super().__init__()
        self.packer = TokenBudgetPacker(CAPACITY, _tokens, buffer_size=BUFFER)

    def packing_sample_size(self, sample: Any) -> int:
        return self.packer.sample_size(sample)

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        line = sample["json"]
        return {"__restore_key__": sample["__restore_key__"], "id": line["id"], "n": line["n"]}

    def select_samples_to_pack(self, samples: list[Any]) -> Any:
        return self.packer(samples)

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        parts = []
        for s in samples:
            whole, start, stop = token_window(s, _tokens)
            parts.append((whole["id"], start, stop))
        return {"__restore_key__": (), "parts": parts}

    def batch(self, samples: list[Any]) -> list[Any]:
        return [s["parts"] for s in samples]


def budget_loader(
    path: str | Path, workers: int, *, world: int = 1, rank: int = 0, **options: Any
) -> Loader:
    if world > 1:
        config = WorkerConfig.default_worker_config(num_workers=workers)
    else:
        config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
    settings: dict[str, Any] = {
        "batch_size": 2,
        "shuffle_buffer_size": 20,
        "max_samples_per_sequence": 10,
        "virtual_workers": 4,
        "packing_buffer_size": BUFFER,
        **options,
    }
    dataset = get_train_dataset(
        str(path), worker_config=config, task_encoder=BudgetPacking(), **settings
    )
    return get_savable_loader(dataset)
