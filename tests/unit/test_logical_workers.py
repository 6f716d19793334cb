"""Energon's logical-worker names (its #236) over stoker's virtual workers."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from stoker import (
    LogicalWorkerAssignment,
    WorkerConfig,
    get_skip_safe,
    get_train_dataset,
    skip_safe,
    stateless,
)
from stoker.errors import ConfigError
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


def test_fewer_logical_than_physical_workers_is_refused_with_a_hint(dataset: str) -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=4, logical_workers=2)
    with pytest.raises(ConfigError, match="stoker gives each physical worker whole streams"):
        get_train_dataset(dataset, worker_config=config, batch_size=2)
