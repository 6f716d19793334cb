"""Weight schedules end to end: the realised mix follows ``linear: {0: 100, 1000: 0}`` against a
constant 100 in every window of 100 global batches, in-process, with 2 workers and on 2 gloo ranks;
2 ranks x 2 workers and 1 x 4 yield the same global batches; each dataset comes in its own order,
once; a weight of 0 draws nothing; a restore mid-schedule continues exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import WorkerConfig, get_savable_loader, get_train_dataset
from stoker.errors import ConfigError
from stoker.plan.weights import WeightSchedule
from tests.contract.contract import roundtrip
from tests.integration._blends import jsonl_blend
from tests.integration._schedule_rank import BATCH, VIRTUAL, Keys, batches

RAMP = WeightSchedule.from_points("linear", {0: 100, 1000: 0})
SIZES = {"a": 3000, "b": 6000}
GLOBAL = 1200  # global batches looked at: the ramp and 200 after it


def blend_yaml(first: str) -> str:
    return (f"    blend:\n      - weight: {first}\n        path: a.jsonl\n"
            "      - weight: 100\n        path: b.jsonl\n")  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("schedules")
    jsonl_blend(folder, SIZES, "flat.yaml", blend_yaml("100"))
    return jsonl_blend(folder, SIZES, "ramp.yaml", blend_yaml("{linear: {0: 100, 1000: 0}}"))


def check_shares(global_batches: list[list[str]]) -> None:
    """The share of ``a`` in each window of 100 global batches is the schedule's, +- 3 points."""
    for start in range(0, len(global_batches), 100):
        window = [key for batch in global_batches[start : start + 100] for key in batch]
        realised = sum(key.startswith("a:") for key in window) / len(window)
        j = np.arange(start, start + 100)
        planned = float(np.mean(RAMP.at(j) / (RAMP.at(j) + 100)))
        assert abs(realised - planned) <= 0.03, (start, realised, planned)


def check_once(global_batches: list[list[str]]) -> None:
    keys = [key for batch in global_batches for key in batch]
    assert len(set(keys)) == len(keys), "a sample came twice within its dataset's pass"


@pytest.mark.parametrize("workers", [0, 2])
def test_realised_share_follows_the_schedule(data: Path, workers: int) -> None:
    got = batches(str(data), WorkerConfig(rank=0, world_size=1, num_workers=workers), GLOBAL)
    check_shares(got)
    check_once(got)
    # Weight 0 from batch 1000 on: a batch after it holds nothing of "a" (the nominal batch of a
    # stream's samples is exact here: no filtering, no packing).
    assert not any(key.startswith("a:") for batch in got[1000:] for key in batch)


def test_each_dataset_keeps_its_own_order(data: Path) -> None:
    """One stream: the schedule changes when "a" is drawn, never which "a" sample comes next."""
    one = WorkerConfig(rank=0, world_size=1, num_workers=0)
    ramp = batches(str(data), one, 300, virtual=1)
    flat = batches(str(data.parent / "flat.yaml"), one, 300, virtual=1)

    def of(found: list[list[str]], src: str) -> list[str]:
        return [k for b in found for k in b if k.startswith(src)]

    a_ramp, a_flat = of(ramp, "a:"), of(flat, "a:")
    n = min(len(a_ramp), len(a_flat))
    assert n > 100 and a_ramp[:n] == a_flat[:n]
    b_ramp, b_flat = of(ramp, "b:"), of(flat, "b:")
    n = min(len(b_ramp), len(b_flat))
    assert n > 100 and b_ramp[:n] == b_flat[:n]


def loader(path: Path, workers: int) -> Any:
    dataset = get_train_dataset(
        str(path), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH, shuffle_buffer_size=10, max_samples_per_sequence=20,
        virtual_workers=VIRTUAL, task_encoder=Keys(),
    )  # fmt: skip
    return get_savable_loader(dataset)


def test_restore_mid_schedule_continues_exactly(data: Path) -> None:
    with loader(data, 2) as first:
        it = iter(first)
        for _ in range(500):
            next(it)
        state = roundtrip(first.save_state_rank())
        expected = [next(it) for _ in range(300)]
    with loader(data, 2) as second:
        second.restore_state_rank(state)
        it = iter(second)
        assert [next(it) for _ in range(300)] == expected
    assert len(json.dumps(state)) < 4000  # a position, not a history


mp = pytest.importorskip("torch.multiprocessing")
dist = pytest.importorskip("torch.distributed")


@pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")
def test_two_gloo_ranks_follow_the_schedule_and_match_one_rank(data: Path, tmp_path: Path) -> None:
    from tests.integration._schedule_rank import run_rank

    spec = {"path": str(data), "out": str(tmp_path), "tag": "2x2", "workers": 2,
            "batches": GLOBAL // 2}  # fmt: skip
    mp.spawn(run_rank, args=(2, spec), nprocs=2, join=True)
    per_rank = [json.loads((tmp_path / f"2x2_rank{r}.json").read_text()) for r in range(2)]
    global_batches = [per_rank[j % 2][j // 2] for j in range(GLOBAL)]
    check_shares(global_batches)
    check_once(global_batches)
    alone = batches(str(data), WorkerConfig(rank=0, world_size=1, num_workers=4), GLOBAL)
    assert alone == global_batches


@pytest.mark.parametrize("workers", [0, 2])
def test_stats_give_realised_vs_scheduled_share_per_window(data: Path, workers: int) -> None:
    """``loader.stats(reset=True)`` every 100 batches: the target is the schedule's mean share
    over those batches, and the realised share meets it."""
    with loader(data, workers) as one:
        it = iter(one)
        for start in range(0, 1100, 100):
            for _ in range(100):
                next(it)
            stats = one.stats(reset=True)
            a = next(v for k, v in stats.datasets.items() if k.endswith("a.jsonl"))
            j = np.arange(start, start + 100)
            planned = float(np.mean(RAMP.at(j) / (RAMP.at(j) + 100)))
            assert a.target == pytest.approx(planned, abs=1e-9), start
            assert abs(a.share - planned) <= 0.03, (start, a.share, planned)
            assert a.samples == round(a.share * 100 * BATCH)


def test_restore_with_another_batch_size_is_refused_under_a_schedule(data: Path) -> None:
    """The schedule is keyed by the batch index: a restore may not change the batch size."""
    with loader(data, 0) as first:
        it = iter(first)
        for _ in range(10):
            next(it)
        state = first.save_state_rank()
    dataset = get_train_dataset(
        str(data), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=2 * BATCH, shuffle_buffer_size=10, max_samples_per_sequence=20,
        virtual_workers=VIRTUAL, task_encoder=Keys(),
    )  # fmt: skip
    with get_savable_loader(dataset) as second, pytest.raises(ConfigError) as info:
        second.restore_state_rank(state)
    assert "weight schedules follows the batch index" in str(info.value)
    assert f"batch_size={BATCH}" in str(info.value)
