"""Energon's logical-worker names (its #236) over stoker's virtual workers."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    DefaultTaskEncoder,
    LogicalWorkerAssignment,
    WorkerConfig,
    get_loader,
    get_savable_loader,
    get_skip_safe,
    get_train_dataset,
    skip_safe,
    stateless,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.model.logical_workers import stride_needed
from tests.conftest import write_shard


def test_assignment_of_each_physical_worker() -> None:
    config = WorkerConfig(rank=0, world_size=2, num_workers=2, logical_workers=2)
    assert [config.logical_assignment_for_physical(p) for p in range(4)] == [
        LogicalWorkerAssignment(0, 0, 2),
        LogicalWorkerAssignment(0, 1, 2),
        LogicalWorkerAssignment(1, 0, 2),
        LogicalWorkerAssignment(1, 1, 2),
    ]
    assert (config.physical_worker_count(), config.logical_worker_count()) == (4, 2)
    assert config.logical_workers_per_rank() == 1
    assert config.logical_global_worker_id(override_local_worker_id=1) == 0
    assert stride_needed(config)
    default = WorkerConfig(rank=1, world_size=2, num_workers=0)
    assert default.logical_worker_count() == default.physical_worker_count() == 2
    assert default.logical_local_worker_index() == 0 and not stride_needed(default)


@pytest.mark.parametrize(("workers", "logical"), [(2, 4), (5, 3), (2, 0)])
def test_logical_workers_must_divide_the_physical_ones(workers: int, logical: int) -> None:
    with pytest.raises(ValueError, match=f"logical_workers={logical} must divide"):
        WorkerConfig(rank=0, world_size=1, num_workers=workers, logical_workers=logical)


def test_logical_workers_survive_pickling_and_take_part_in_equality() -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=4, logical_workers=2)
    assert pickle.loads(pickle.dumps(config)).logical_workers == 2
    assert config != WorkerConfig(rank=0, world_size=1, num_workers=4)
    assert config.config()["logical_workers"] == 2
    assert "logical_workers" not in WorkerConfig(rank=0, world_size=1, num_workers=4).config()


def test_skip_safe_marks_and_stateless_keeps_or_sets_it() -> None:
    @stateless
    @skip_safe
    def kept(x: int) -> int:
        return x

    @stateless(skip_safe=True)
    def set_(x: int) -> int:
        return x

    def plain(x: int) -> int:
        return x

    assert get_skip_safe(kept) and get_skip_safe(set_) and not get_skip_safe(plain)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    root: Path = tmp_path_factory.mktemp("logical") / "ds"
    for s in range(4):
        write_shard(root / f"shard_{s}.tar", [(f"s{s}_{i}", {"txt": b"x"}) for i in range(5)])
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return str(root)


def test_logical_workers_become_the_virtual_workers(dataset: str) -> None:
    config = WorkerConfig(rank=0, world_size=2, num_workers=2, logical_workers=4)
    ds = get_train_dataset(dataset, worker_config=config, batch_size=2)
    assert ds.virtual_workers == 4 and not ds.virtual_workers_defaulted


def keys_of(dataset: str, config: WorkerConfig, **kwargs: Any) -> list[list[str]]:
    """The keys of each batch of one finite pass, as ``config``'s rank gets them."""
    encoder = kwargs.pop("task_encoder", None) or DefaultTaskEncoder()
    ds = get_train_dataset(dataset, worker_config=config, batch_size=2, repeat=False,
                           shuffle_buffer_size=None, max_samples_per_sequence=3,
                           task_encoder=encoder)  # fmt: skip
    with get_loader(ds, **kwargs) as loader:
        return [list(batch.__key__) for batch in loader]


ALL_KEYS = sorted(f"s{s}_{i}" for s in range(4) for i in range(5))


def test_sharers_of_a_logical_stream_hand_out_its_batches_in_turn(dataset: str) -> None:
    # #236: 6 physical workers over 2 logical ones: ranks 0-2 share logical worker 0, 3-5 the 1.
    whole = [keys_of(dataset, WorkerConfig(rank=r, world_size=2, num_workers=0,
                                           logical_workers=2)) for r in range(2)]  # fmt: skip
    shared = [keys_of(dataset, WorkerConfig(rank=r, world_size=6, num_workers=0,
                                            logical_workers=2)) for r in range(6)]  # fmt: skip
    for logical in range(2):
        for offset in range(3):
            assert shared[3 * logical + offset] == whole[logical][offset::3]
    assert sorted(k for batches in shared for batch in batches for k in batch) == ALL_KEYS
    ds = get_train_dataset(dataset, batch_size=2, repeat=False,
                           worker_config=WorkerConfig(rank=2, world_size=6, num_workers=0,
                                                      logical_workers=2))  # fmt: skip
    assert len(ds) == len(shared[2]) == 1  # 5 batches of logical worker 0: offset 2 has one


def test_dataloader_workers_share_logical_streams_and_deliver_each_sample_once(
    dataset: str,
) -> None:
    whole = keys_of(dataset, WorkerConfig(rank=0, world_size=1, num_workers=2, logical_workers=2))
    shared = keys_of(dataset, WorkerConfig(rank=0, world_size=1, num_workers=4, logical_workers=2))
    # workers 0 and 1 share logical worker 0, 2 and 3 the other; the rank takes them in turn
    assert shared[:4] == [whole[0], whole[2], whole[1], whole[3]]
    assert sorted(map(tuple, shared)) == sorted(map(tuple, whole))
    assert sorted(k for batch in shared for k in batch) == ALL_KEYS


def first_batches(dataset: str, config: WorkerConfig, n: int) -> list[list[str]]:
    """The keys of the first ``n`` batches of a shuffled, repeating loader."""
    ds = get_train_dataset(dataset, worker_config=config, batch_size=2, shuffle_buffer_size=4,
                           max_samples_per_sequence=3)  # fmt: skip
    with get_loader(ds) as loader:
        return [list(batch.__key__) for _, batch in zip(range(n), loader, strict=False)]


def test_a_sharer_restores_where_it_stopped(dataset: str) -> None:
    config = WorkerConfig(rank=1, world_size=3, num_workers=0, logical_workers=1)
    ds = get_train_dataset(dataset, worker_config=config, batch_size=2, shuffle_buffer_size=4,
                           max_samples_per_sequence=3)  # fmt: skip
    with get_savable_loader(ds) as loader:
        batches = iter(loader)
        head = [list(next(batches).__key__) for _ in range(3)]
        state = loader.save_state_rank()
        tail = [list(next(batches).__key__) for _ in range(8)]
    with get_savable_loader(ds) as again:
        again.restore_state_rank(state)
        batches = iter(again)
        assert [list(next(batches).__key__) for _ in range(8)] == tail
    # offset 1 of 3: the logical worker's batches 1, 4, 7, ... (10 per epoch: into the third)
    alone = WorkerConfig(rank=0, world_size=1, num_workers=0, logical_workers=1)
    assert head + tail == first_batches(dataset, alone, 33)[1::3]


class CountsBatches(DefaultTaskEncoder):  # type: ignore[type-arg]
    def __init__(self) -> None:
        super().__init__()
        self.batched: list[list[str]] = []

    @stateless
    @skip_safe
    def batch(self, samples: list[Any]) -> Any:
        self.batched.append([s.__key__ for s in samples])
        return super().batch(samples)


class CountsBatchesUnsafe(CountsBatches):  # type: ignore[misc]
    @stateless
    def batch(self, samples: list[Any]) -> Any:
        self.batched.append([s.__key__ for s in samples])
        return DefaultTaskEncoder.batch(self, samples)


def test_skip_safe_hooks_run_only_for_the_sharers_own_batches(dataset: str) -> None:
    config = WorkerConfig(rank=0, world_size=3, num_workers=0, logical_workers=1)
    safe, unsafe = CountsBatches(), CountsBatchesUnsafe()
    own = keys_of(dataset, config, task_encoder=safe)
    assert safe.batched == own and len(own) == 4  # batches 0, 3, 6, 9 of 10
    assert keys_of(dataset, config, task_encoder=unsafe) == own
    assert len(unsafe.batched) == 10 and unsafe.batched[::3] == own
