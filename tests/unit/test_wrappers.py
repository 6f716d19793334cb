"""The building blocks of the dataset wrappers: where to resume after each output, the position
layout, error rules, argument checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    BatchDataset,
    ConcatDataset,
    EpochizeDataset,
    LimitDataset,
    MapDataset,
    RepeatDataset,
    ShuffleBufferDataset,
    SkipSample,
    StokerError,
    WorkerConfig,
    get_val_dataset,
)
from stoker.errors import ConfigError
from stoker.pipeline.refs import Position
from stoker.wrappers.calls import Failures, emit, get_sample_restore_key
from tests.integration.test_mix_batch import write_ids

BEFORE = (Position((4,), 0), None)
AFTER = (Position((5,), 0), {"pack": {"refs": [1]}})
WC = WorkerConfig(rank=0, world_size=1, num_workers=0)


def test_emit_resumes_inside_a_group_until_its_last_output() -> None:
    out = list(emit(["a", "b", "c"], BEFORE, AFTER, 0))
    assert out == [("a", BEFORE, 1), ("b", BEFORE, 2), ("c", AFTER, 0)]
    assert list(emit(["a", "b", "c"], BEFORE, AFTER, 2)) == [("c", AFTER, 0)]
    assert list(emit(["a"], BEFORE, AFTER, 0)) == [("a", AFTER, 0)]
    assert list(emit([], BEFORE, AFTER, 0)) == []


def test_failures_skip_log_and_stop_after_the_tolerance() -> None:
    failures = Failures(WC, "fn", tolerance=2)

    def fn(x: int) -> Iterator[int]:
        if x == 0:
            raise SkipSample()
        if x < 0:
            raise ValueError("negative")
        yield from range(x)

    assert list(failures.run(fn, 3)) == [0, 1, 2]
    assert list(failures.run(fn, 0)) == []
    assert list(failures.run(fn, -1)) == []
    with pytest.raises(StokerError, match="2 samples failed in a row"):
        list(failures.run(fn, -2))
    legacy: list[Any] = []
    called = Failures(WC, "fn", 0, handler=lambda e, sample: legacy.append((str(e), sample)))
    assert list(called.run(fn, -5)) == [] and legacy == [("negative", -5)]


@pytest.fixture(scope="module")
def numbers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ids(tmp_path_factory.mktemp("wrapper_units") / "n.jsonl", 0, 10)


def val(path: Path) -> Any:
    return get_val_dataset(str(path), split_part="train", batch_size=None, worker_config=WC)


def test_position_layout_nests_the_inner_position(numbers: Path) -> None:
    inner = val(numbers)
    mapped = MapDataset(inner, lambda s: s, worker_config=WC)
    batched = BatchDataset(mapped, 2, list, worker_config=WC)
    assert batched.position_size() == inner.position_size() + 2
    position = Position((7, 1), 3)
    assert batched.split(batched.join(position, [2])) == (position, [2])
    assert batched.fingerprint()["wrappers"] == [
        {"type": "MapDataset", "map_fn": "test_position_layout_nests_the_inner_position.<locals>."
                                        "<lambda>"},
        {"type": "BatchDataset", "batch_size": 2, "batcher": "list", "drop_last": False},
    ]  # fmt: skip
    shuffled = ShuffleBufferDataset(inner, 3, worker_config=WC)
    assert shuffled.position_size() == 2 * inner.position_size() + 3  # mark, anchor, counts
    assert ConcatDataset(inner, inner, worker_config=WC).position_size() == 2 * 2 + 1


def test_lengths_follow_energon(numbers: Path) -> None:
    inner = val(numbers)
    assert len(BatchDataset(inner, 3, list, worker_config=WC)) == 4
    assert len(BatchDataset(inner, 3, list, drop_last=True, worker_config=WC)) == 3
    assert len(LimitDataset(inner, 4, worker_config=WC)) == 4
    assert len(LimitDataset(inner, 40, worker_config=WC)) == 10
    assert len(RepeatDataset(inner, repeats=3, worker_config=WC)) == 30
    assert len(EpochizeDataset(inner, 25, WC)) == 25
    assert len(ConcatDataset(inner, inner, worker_config=WC)) == 20


def test_arguments_are_checked(numbers: Path) -> None:
    inner = val(numbers)
    with pytest.raises(ConfigError, match="batch_size"):
        BatchDataset(inner, 0, list, worker_config=WC)
    with pytest.raises(ConfigError, match="length"):
        LimitDataset(inner, -1, worker_config=WC)
    with pytest.raises(ConfigError, match="repeats"):
        RepeatDataset(inner, repeats=-2, worker_config=WC)
    with pytest.raises(ConfigError, match="size"):
        ShuffleBufferDataset(inner, 0, worker_config=WC)
    other = WorkerConfig(rank=0, world_size=1, num_workers=2)
    with pytest.raises(ConfigError, match="same WorkerConfig"):
        MapDataset(inner, lambda s: s, worker_config=other)
    with pytest.raises(ConfigError, match="virtual_workers"):
        ConcatDataset(inner, val(numbers).with_virtual_workers(3) or inner, worker_config=WC)


def test_sample_restore_key_of_objects_and_dicts() -> None:
    assert get_sample_restore_key({"__restore_key__": ("a", 1)}) == ("a", 1)
    assert get_sample_restore_key({"x": 1}) is None
    assert get_sample_restore_key(object()) is None
