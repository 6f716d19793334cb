"""One rank of the end-of-data test; run by ``torchrun`` from ``test_end_sync.py``.

Usage: ``torchrun --nproc-per-node 3 _end_sync_rank.py DATASET OUT``. Each rank joins a gloo
process group, iterates two finite passes under each ``sync_end`` mode, one sample per batch,
and writes the keys of each pass to ``OUT/rank{rank}.json``; then Energon's
``RedistributeLoader`` saved in its shared tail and restored (``rounds_resumed``). Every pass is
followed by a barrier: a rank that hung would keep the others there, and the test's timeout would
fail it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from stoker import (
    DefaultTaskEncoder,
    SkipSample,
    WorkerConfig,
    get_loader,
    get_savable_loader,
    get_train_dataset,
)
from stoker.runtime.end_sync_loaders import RedistributeLoader

#: Skipped by the task encoder: the rank that holds them runs out long before the others.
SKIPPED = {f"train_c_0{i}" for i in range(5)}


class SkipSome(DefaultTaskEncoder):  # type: ignore[type-arg]
    def encode_sample(self, sample):  # type: ignore[no-untyped-def]
        if sample.__key__ in SKIPPED:
            raise SkipSample()
        return sample


def run_rank(dataset: str, out: str) -> None:
    dist.init_process_group("gloo")
    try:
        report: dict[str, object] = {}
        for mode in (None, "equal", "stop_first", "redistribute", "redistribute_rounds"):
            worker_config = WorkerConfig.default_worker_config(num_workers=0)
            train = get_train_dataset(
                dataset, worker_config=worker_config, batch_size=1, shuffle_buffer_size=None,
                max_samples_per_sequence=None, repeat=False, task_encoder=SkipSome(),
            )  # fmt: skip
            with get_loader(train, sync_end=mode) as loader:
                passes = []
                for _ in range(2):
                    passes.append([key for batch in loader for key in batch.__key__])
                    dist.barrier()
                report[str(mode)] = passes
                report[f"{mode}_dropped"] = loader.end_sync.dropped
        report["rounds_resumed"] = resumed_rounds(dataset, report)
        Path(out, f"rank{dist.get_rank()}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def resumed_rounds(dataset: str, report: dict[str, object]) -> list[list[str]]:
    """Energon's ``RedistributeLoader`` saved two batches into the shared tail of the first
    pass and restored into a new loader: the keys of both passes."""
    import torch

    own = torch.tensor([len(report["None"][0])])  # type: ignore[index]
    dist.all_reduce(own, op=dist.ReduceOp.MIN)
    steps = int(own.item()) + 2  # every rank takes the same number: into the shared tail

    def loader() -> RedistributeLoader:
        worker_config = WorkerConfig.default_worker_config(num_workers=0)
        train = get_train_dataset(
            dataset, worker_config=worker_config, batch_size=1, shuffle_buffer_size=None,
            max_samples_per_sequence=None, repeat=False, task_encoder=SkipSome(),
        )  # fmt: skip
        return RedistributeLoader(get_savable_loader(train))

    first = loader()
    head = [key for _, batch in zip(range(steps), first, strict=False) for key in batch.__key__]
    state = first.save_state_rank()
    first.close()
    again = loader()
    again.restore_state_rank(state)
    passes = [head + [key for batch in again for key in batch.__key__]]
    dist.barrier()
    passes.append([key for batch in again for key in batch.__key__])
    dist.barrier()
    again.close()
    return passes


if __name__ == "__main__":
    run_rank(sys.argv[1], sys.argv[2])
