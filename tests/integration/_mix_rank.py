"""One rank of the mix-change test (run by ``torch.multiprocessing.spawn``): it loads a blend on
2 gloo ranks, takes ``batches`` batches, saves every rank's state (``save_state_global``) and
writes its batches and, on rank 0, the states to ``OUT``."""

from __future__ import annotations

import datetime
import json
import multiprocessing
from pathlib import Path
from typing import Any

import torch.distributed as dist

from stoker import WorkerConfig, get_savable_loader, get_train_dataset
from tests.integration._schedule_rank import BATCH, VIRTUAL, Keys


def loader(path: str, worker_config: WorkerConfig, **options: Any) -> Any:
    dataset = get_train_dataset(
        path, worker_config=worker_config, batch_size=BATCH, shuffle_buffer_size=10,
        max_samples_per_sequence=20, virtual_workers=VIRTUAL, task_encoder=Keys(),
    )  # fmt: skip
    return get_savable_loader(dataset, **options)


def run_rank(rank: int, world_size: int, spec: dict[str, Any]) -> None:
    multiprocessing.set_start_method("fork", force=True)  # as torchrun's ranks do
    out = Path(spec["out"])
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/rendezvous",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        config = WorkerConfig.default_worker_config(num_workers=spec["workers"])
        with loader(spec["path"], config) as first:
            it = iter(first)
            got = [next(it) for _ in range(spec["batches"])]
            states = first.save_state_global(0)
        Path(out, f"rank{rank}.json").write_text(json.dumps(got))
        if rank == 0:
            Path(out, "states.json").write_text(json.dumps(states))
        dist.barrier()
    finally:
        dist.destroy_process_group()
