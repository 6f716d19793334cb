"""``samples_per_dataset()`` over several passes: the current pass and the total, also restored."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset
from tests.contract.contract import roundtrip
from tests.integration._blends import Source, jsonl_blend

SIZES = {"a": 30, "b": 18}


@pytest.fixture(scope="module")
def blend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jsonl_blend(tmp_path_factory.mktemp("per_pass"), SIZES, "epochized.yaml",
                       "    blend_epochized:\n"
                       "      - {path: a.jsonl, repetitions: 1}\n"
                       "      - {path: b.jsonl, repetitions: 1}\n")  # fmt: skip


def loader(path: Path, workers: int) -> Any:
    dataset = get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=4, shuffle_buffer_size=None, max_samples_per_sequence=None,
        virtual_workers=2, repeat=False, task_encoder=Source(),
    )  # fmt: skip
    return get_loader(dataset)


def by_path(path: Path, counts: dict[str, int]) -> dict[str, int]:
    return {str(path.parent / f"{name}.jsonl"): n for name, n in counts.items()}


def take(it: Any, n: int) -> collections.Counter[str]:
    return collections.Counter(src for _ in range(n) for src in next(it))


@pytest.mark.parametrize("workers", [0, 2])
def test_counts_per_pass_and_in_total(blend: Path, workers: int) -> None:
    with loader(blend, workers) as first:
        seen = collections.Counter(src for batch in first for src in batch)
        assert seen == SIZES  # one pass: every sample once
        assert first.samples_per_dataset() == by_path(blend, SIZES)
        it = iter(first)  # the second pass
        one = take(it, 1)  # one stream has started it, the other not yet
        assert first.samples_per_dataset(this_pass=True) == by_path(blend, one)
        assert first.samples_per_dataset() == by_path(blend, {k: SIZES[k] + one[k] for k in SIZES})
        early = one + take(it, 4)
        assert first.samples_per_dataset(this_pass=True) == by_path(blend, early)
        total = {k: SIZES[k] + early[k] for k in SIZES}
        assert first.samples_per_dataset() == by_path(blend, total)
        state = roundtrip(first.save_state_rank())
        late = take(it, 3)
    assert state["passed"]  # what the first pass gave, per stream
    with loader(blend, 1 if workers else 0) as resumed:  # another worker count
        resumed.restore_state_rank(state)
        assert resumed.samples_per_dataset() == by_path(blend, total)
        assert take(iter(resumed), 3) == late
        both = {k: total[k] + late[k] for k in SIZES}
        assert resumed.samples_per_dataset() == by_path(blend, both)
        assert resumed.samples_per_dataset(this_pass=True) == by_path(
            blend, {k: early[k] + late[k] for k in SIZES}
        )
