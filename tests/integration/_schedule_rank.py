"""One rank of the weight-schedule test (run by ``torch.multiprocessing.spawn``): it loads the
scheduled blend with ``WorkerConfig.default_worker_config`` and writes its batches to
``OUT/{tag}_rank{rank}.json`` for the parent to put in global order."""

from __future__ import annotations

import datetime
import json
import multiprocessing
from pathlib import Path
from typing import Any

import torch.distributed as dist

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless

BATCH, VIRTUAL = 4, 4


class Keys(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Each sample becomes ``source:line``; a batch is the list of those."""

    @stateless
    def encode_sample(self, sample: Any) -> str:
        return f"{sample['json']['src']}:{sample['json']['i']}"

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


def batches(
    path: str, worker_config: WorkerConfig, n: int, virtual: int = VIRTUAL
) -> list[list[str]]:
    """The first ``n`` batches this rank yields."""
    dataset = get_train_dataset(
        path, worker_config=worker_config, batch_size=BATCH, shuffle_buffer_size=10,
        max_samples_per_sequence=20, virtual_workers=virtual, task_encoder=Keys(),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        it = iter(loader)
        return [next(it) for _ in range(n)]


def run_rank(rank: int, world_size: int, spec: dict[str, Any]) -> None:
    multiprocessing.set_start_method("fork", force=True)  # as torchrun's ranks do
    out = Path(spec["out"])
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/rendezvous_{spec['tag']}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        config = WorkerConfig.default_worker_config(num_workers=spec["workers"])
        got = batches(spec["path"], config, spec["batches"])
        Path(out, f"{spec['tag']}_rank{rank}.json").write_text(json.dumps(got))
        dist.barrier()
    finally:
        dist.destroy_process_group()
