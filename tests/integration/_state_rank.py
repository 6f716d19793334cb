"""One rank of the distributed save/restore test (run by ``torch.multiprocessing.spawn``).

Each rank joins a fresh gloo process group, builds a training loader with
``WorkerConfig.default_worker_config`` and writes the fingerprints of the batches it yields to
``OUT/{tag}_{method}_rank{rank}.json``, for the parent test to put in global order and compare.

``spec["mode"]`` is ``"save"`` (run uninterrupted, and run, save with ``save_state_global`` and
continue) or ``"restore"`` (continue from saved states, once per method in ``spec["methods"]``).
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from stoker import WorkerConfig, get_savable_loader, get_train_dataset
from stoker.runtime.loader import Loader
from tests.contract.contract import rank_free, take


def make_loader(dataset: str, num_workers: int, worker_type: str | None = None) -> Loader:
    worker_config = WorkerConfig.default_worker_config(num_workers=num_workers)
    train = get_train_dataset(
        dataset,
        worker_config=worker_config,
        batch_size=4,
        shuffle_buffer_size=5,
        max_samples_per_sequence=3,
        virtual_workers=4,
    )
    return get_savable_loader(train, worker_type=worker_type)


def run_rank(rank: int, world_size: int, spec: dict[str, Any]) -> None:
    # A rank started by mp.spawn inherits the "spawn" start method, so its dataloader workers
    # would re-import torch (seconds each). Ranks started by torchrun fork them: do as they do.
    multiprocessing.set_start_method("fork", force=True)
    out = Path(spec["out"])
    dist.init_process_group(
        "gloo",
        init_method=f"file://{out}/rendezvous_{spec['tag']}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        if spec["mode"] == "save":
            report = _save(rank, spec)
        else:
            report = {method: _restore(rank, method, spec) for method in spec["methods"]}
        report["topology"] = [dist.get_rank(), dist.get_world_size()]
        Path(out, f"{spec['tag']}_rank{rank}.json").write_text(json.dumps(report))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _save(rank: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Uninterrupted batches, then the same run saved after ``spec["steps"]`` and continued."""
    steps, after = spec["steps"], spec["after"]
    with make_loader(spec["dataset"], spec["workers"], spec.get("worker_type")) as loader:
        reference = take(loader, steps + after)
    with make_loader(spec["dataset"], spec["workers"], spec.get("worker_type")) as loader:
        head = take(loader, steps)
        states = loader.save_state_global(global_dst_rank=0)
        if rank == 0:
            assert states is not None
            torch.save(states, spec["states_file"])
        tail = take(loader, after)
    return {
        "reference": _plain(reference),
        "head": _plain(head),
        "tail": _plain(tail),
        "gathered": None if states is None else len(states),
    }


def _restore(rank: int, method: str, spec: dict[str, Any]) -> Any:
    """The next ``spec["after"]`` batches of this rank after restoring with ``method``."""
    with make_loader(spec["dataset"], spec["workers"], spec.get("worker_type")) as loader:
        if method == "global_all":  # every rank passes the full list
            loader.restore_state_global(_load(spec["states_file"]))
        elif method == "global_src0":  # only rank 0 has it; restore_state_global broadcasts
            states = _load(spec["states_file"]) if rank == 0 else None
            loader.restore_state_global(states, src_rank=0)
        elif method == "rank":  # same topology: each rank its own entry
            loader.restore_state_rank(_load(spec["states_file"])[rank])
        elif method == "redist_rank":  # `stoker checkpoint redist` output, one entry per rank
            loader.restore_state_rank(_load(spec["redist_file"])[rank])
        elif method == "redist_global":
            loader.restore_state_global(_load(spec["redist_file"]))
        else:
            raise ValueError(f"unknown restore method {method!r}")
        return _plain(take(loader, spec["after"]))


def _load(path: str) -> Any:
    return torch.load(path, weights_only=True)


def _plain(value: Any) -> Any:
    """Fingerprints as JSON sees them (tuples become lists), for comparison across processes;
    without the rank-local batch index of restore keys (it differs between topologies)."""
    return json.loads(json.dumps(rank_free(value)))
