"""The same dataset under two blend paths: each path is its own stream of that dataset, with its
own order (each passes over every sample once), and both resume where they were."""

from __future__ import annotations

import collections
import warnings
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    stateless,
)
from tests.contract.contract import roundtrip
from tests.integration._blends import jsonl_blend

N = 120


class PathKeys(DefaultTaskEncoder):  # type: ignore[type-arg]
    """``path:line``: which blend path (its subflavor) and which sample."""

    @stateless
    def encode_sample(self, sample: Any) -> str:
        return f"{sample['__subflavors__']['via']}:{sample['json']['i']}"

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entry = "      - {weight: %s, path: a.jsonl, subflavors: {via: %s}}\n"
    train = "    blend:\n" + entry % ("{step: {0: 1, 30: 3}}", "x") + entry % ("1", "y")
    return jsonl_blend(tmp_path_factory.mktemp("two_paths"), {"a": N}, "twice.yaml", train)


def loader(path: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "named more than once": what we test
        dataset = get_train_dataset(
            str(path), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
            batch_size=2, shuffle_buffer_size=20, max_samples_per_sequence=10, virtual_workers=1,
            task_encoder=PathKeys(),
        )  # fmt: skip
    return get_savable_loader(dataset)


def test_two_paths_have_their_own_orders_and_resume(twice: Path) -> None:
    with loader(twice) as first:
        it = iter(first)
        head = [k for _ in range(40) for k in next(it)]
        state = roundtrip(first.save_state_rank())
        tail = [k for _ in range(60) for k in next(it)]
    with loader(twice) as second:
        second.restore_state_rank(state)
        it = iter(second)
        assert [k for _ in range(60) for k in next(it)] == tail
    keys = head + tail
    per_path = {via: [int(k[2:]) for k in keys if k[0] == via] for via in "xy"}
    for via, order in per_path.items():
        first_pass = order[:N]
        assert len(set(first_pass)) == len(first_pass), f"path {via} repeated a sample"
    n = min(len(per_path["x"]), len(per_path["y"]), N)
    assert n > 50 and per_path["x"][:n] != per_path["y"][:n]  # two orders, not one twice
    assert (
        collections.Counter(k[0] for k in tail)["x"] > collections.Counter(k[0] for k in tail)["y"]
    )
