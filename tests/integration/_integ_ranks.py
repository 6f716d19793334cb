"""One rank of the context-parallel test: real gloo processes, real megatron-core parallel state.

:func:`run_rank` is started by ``torch.multiprocessing.start_processes`` from
``test_integrations_megatron.py``. It records, in ``OUT/rank{r}.json``, where
``stoker.integrations.topology`` places the rank before and after megatron-core's model parallel
state is initialised (with context parallelism 2), and the keys of the first training and
validation micro-batches the data module gives it, found through ``parallel_state`` and through a
``ProcessGroupCollection``; and whether the training-loader state that global rank 0 saves
(:class:`ResumableLoader`, as the Lightning data module saves it) restores every rank.
"""

from __future__ import annotations

import itertools
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from examples.vlm_data import ResizeNormalize, WordTokenizer

from stoker import get_savable_loader, get_train_dataset
from stoker.integrations.loaders import ResumableLoader
from stoker.integrations.megatron import MultiModalDataModule
from stoker.integrations.topology import data_parallel_place, data_parallel_worker_config

CONTEXT_PARALLEL = 2


def first_keys(data: MultiModalDataModule, batches: int = 3) -> dict[str, Any]:
    train, val = data.build()
    keys = {
        "train": [next(train).__key__ for _ in range(batches)],
        "val": [next(val).__key__ for _ in range(batches)],
        "world_size": train.loader.dataset.worker_config.world_size,
    }
    train.loader.close()
    val.loader.close()
    return keys


def run_rank(rank: int, world_size: int, port: int, dataset: str, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        before = data_parallel_place()
        with warnings.catch_warnings():  # Transformer Engine / Apex are not installed
            warnings.simplefilter("ignore")
            from megatron.core import parallel_state
            from megatron.core.process_groups_config import ProcessGroupCollection

        parallel_state.initialize_model_parallel(context_parallel_size=CONTEXT_PARALLEL)
        after = data_parallel_place()
        tokenizer = WordTokenizer(["a red circle", "a blue square", "a green triangle"])

        def data(pg_collection: Any = None) -> MultiModalDataModule:
            return MultiModalDataModule(
                dataset,
                tokenizer,
                ResizeNormalize(8),
                seq_length=8,
                micro_batch_size=2,
                num_workers=0,
                pg_collection=pg_collection,
            )

        report = {
            "before": [before.rank, before.world_size, before.source],
            "after": [after.rank, after.world_size, after.source],
            "cp_rank": parallel_state.get_context_parallel_rank(),
            "parallel_state": first_keys(data()),
            "pg_collection": first_keys(data(ProcessGroupCollection.use_mpu_process_groups())),
            "resume": resume_report(dataset),
        }
        Path(out, f"rank{rank}.json").write_text(json.dumps(report))
        parallel_state.destroy_model_parallel()
    finally:
        dist.destroy_process_group()


def resume_report(dataset: str) -> dict[str, Any]:
    """Save a :class:`ResumableLoader`'s state on every rank, restore every rank from the state
    global rank 0 saved (the one a framework writes to its checkpoint)."""

    def loader() -> ResumableLoader:
        ds = get_train_dataset(
            dataset,
            worker_config=data_parallel_worker_config(0),
            batch_size=2,
            shuffle_buffer_size=5,
            max_samples_per_sequence=3,
        )
        return ResumableLoader(get_savable_loader(ds))

    first = loader()
    batches = iter(first)
    for _ in range(3):
        next(batches)
    state = first.state_dict()  # a collective: all data-parallel ranks' positions
    expected = [next(batches).__key__ for _ in range(4)]
    first.close()
    box = [json.loads(json.dumps(state)) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    restored = loader()
    restored.load_state_dict(box[0])
    report = {
        "ranks": [s["topology"]["rank"] for s in state["ranks"]],
        "expected": expected,
        "restored": [batch.__key__ for batch in itertools.islice(restored, 4)],
    }
    restored.close()
    return report
