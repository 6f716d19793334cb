"""Dataloader workers keep what they inherit from the main process out of the collector's reach.

A forked worker's first full collection would walk the whole inherited heap (torch, numpy, the
dataset) and so copy it page by page (~0.15 s of CPU in each worker's first second, measured with
S3 datasets). Workers ``gc.freeze()`` at start; the main process is left as it is.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_val_dataset
from tests.conftest import make_val_texts


class FreezeProbe(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Batches that tell which process made them and how many objects it holds frozen."""

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {"pid": os.getpid(), "frozen": gc.get_freeze_count(), "n": len(samples)}


def test_workers_freeze_what_they_inherit(tmp_path: Path) -> None:
    root = make_val_texts(tmp_path / "ds", shards=2, per_shard=4)
    before = gc.get_freeze_count()
    dataset = get_val_dataset(
        str(root), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2, task_encoder=FreezeProbe(),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        batches = list(loader)
    assert sum(b["n"] for b in batches) == 8
    assert len({b["pid"] for b in batches}) == 2 and os.getpid() not in {b["pid"] for b in batches}
    assert all(b["frozen"] > 1000 for b in batches)  # the inherited heap: many objects
    assert gc.get_freeze_count() == before  # the training process is not touched
