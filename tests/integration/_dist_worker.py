"""One rank of the distributed loading test; run by ``torchrun`` from ``test_distributed.py``.

Usage: ``torchrun --nproc-per-node N _dist_worker.py DATASET OUT``. Each rank joins a gloo
process group, takes its rank and world size from ``torch.distributed`` through
``WorkerConfig.default_worker_config``, loads a validation pass and one training epoch with two
dataloader workers, gathers every rank's ``loader.global_stats()`` after the validation pass,
and writes what it saw to ``OUT/rank{rank}.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset


def run_rank(dataset: str, out: str) -> None:
    dist.init_process_group("gloo")
    try:
        worker_config = WorkerConfig.default_worker_config(num_workers=2)
        val = get_val_dataset(dataset, worker_config=worker_config, batch_size=2)
        train = get_train_dataset(
            dataset,
            worker_config=worker_config,
            batch_size=2,
            shuffle_buffer_size=5,
            max_samples_per_sequence=3,
            repeat=False,
        )
        with get_loader(val, sync_end=None) as loader:  # every sample: no end agreement
            val_keys = [key for batch in loader for key in batch.__key__]
            gathered = loader.global_stats()  # every rank's stats(), through gloo
        report = {
            "rank": worker_config.rank,
            "world_size": worker_config.world_size,
            "num_workers": worker_config.num_workers,
            "val": val_keys,
            "global_samples": [stats.samples for stats in gathered],
            "train": [key for batch in get_loader(train, sync_end=None) for key in batch.__key__],
        }
        Path(out, f"rank{dist.get_rank()}.json").write_text(json.dumps(report))
        dist.barrier()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    run_rank(sys.argv[1], sys.argv[2])
