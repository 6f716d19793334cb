"""One gloo rank of the elastic token-budget packing test (run by ``torch.multiprocessing``):
2 ranks x 2 dataloader workers take ``steps`` batches, save with ``save_state_global`` (rank 0
writes ``OUT/states.pt``) and take ``after`` more, written to ``OUT/rank{r}.json``."""

from __future__ import annotations

import datetime
import json
import multiprocessing
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tests.integration._budget_data import budget_loader


def run_rank(rank: int, world_size: int, spec: dict[str, Any]) -> None:
    multiprocessing.set_start_method("fork", force=True)  # workers as under torchrun
    out = Path(spec["out"])
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/rendezvous",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=300),
    )
    try:
        with budget_loader(spec["dataset"], 2, world=world_size) as loader:
            batches = iter(loader)
            for _ in range(spec["steps"]):
                next(batches)
            states = loader.save_state_global(global_dst_rank=0)
            if rank == 0:
                torch.save(states, out / "states.pt")
            tail = [next(batches) for _ in range(spec["after"])]
        (out / f"rank{rank}.json").write_text(json.dumps({"tail": tail}))
        dist.barrier()
    finally:
        dist.destroy_process_group()
