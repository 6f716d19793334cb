"""Blends by size: with ``blend_sample_size``, the weights apply to the sum of sample sizes.

Two JSONL datasets whose samples carry a token count (mean 100 and mean 1000) blended 1:1 give
equal token totals (within 3 %) in-process and with 2 workers; a schedule moves the totals to the
weights at the current batch; a restore mid-run continues exactly; without the hook the position
and the draws are the sample-count blend's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    stateless,
)
from stoker.format.jsonl import prepare_jsonl
from tests.contract.contract import roundtrip
from tests.integration._blends import V2

MEANS = {"a": 100, "b": 1000}
BATCH, VIRTUAL = 8, 4


class Counted(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Each sample becomes ``source:line:tokens``; a batch is the list of those."""

    @stateless
    def encode_sample(self, sample: Any) -> str:
        j = sample["json"]
        return f"{j['src']}:{j['i']}:{j['n']}"

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


class Tokens(Counted):
    """The same, blended by token count."""

    @stateless
    def blend_sample_size(self, sample: Any) -> int:
        return int(sample["json"]["n"])


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sized")
    rng = np.random.default_rng(0)
    for src, mean in MEANS.items():
        sizes = rng.integers(mean // 2, mean * 3 // 2 + 1, size=4000)
        lines = [json.dumps({"src": src, "i": i, "n": int(n)}) + "\n" for i, n in enumerate(sizes)]
        (folder / f"{src}.jsonl").write_text("".join(lines))
        prepare_jsonl(str(folder / f"{src}.jsonl"))
    for name, weight in (("even.yaml", "1"), ("stepped.yaml", "{step: {0: 1, 100: 3}}")):
        (folder / name).write_text(
            V2 + f"    blend:\n      - weight: {weight}\n        path: a.jsonl\n"
            "      - weight: 1\n        path: b.jsonl\n"
        )
    return folder


def loader(path: Path, encoder: Counted, workers: int) -> Any:
    dataset = get_train_dataset(
        str(path), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH, shuffle_buffer_size=10, max_samples_per_sequence=20,
        virtual_workers=VIRTUAL, task_encoder=encoder,
    )  # fmt: skip
    return get_savable_loader(dataset)


def take(path: Path, encoder: Counted, workers: int, n: int) -> list[list[str]]:
    with loader(path, encoder, workers) as it:
        got = iter(it)
        return [next(got) for _ in range(n)]


def tokens(batches: list[list[str]]) -> dict[str, int]:
    totals = dict.fromkeys(MEANS, 0)
    for key in (k for batch in batches for k in batch):
        src, _, n = key.split(":")
        totals[src] += int(n)
    return totals


@pytest.mark.parametrize("workers", [0, 2])
def test_one_to_one_gives_equal_token_totals(data: Path, workers: int) -> None:
    got = take(data / "even.yaml", Tokens(), workers, 250)
    totals = tokens(got)
    assert abs(totals["a"] / totals["b"] - 1) <= 0.03, totals
    keys = [k for batch in got for k in batch]
    assert len(set(keys)) == len(keys)  # each dataset still once, in its own order
    # by count, "a" (10x shorter) is drawn about 10 times as often
    assert sum(k.startswith("a:") for k in keys) > 8 * sum(k.startswith("b:") for k in keys)


def test_without_the_hook_samples_are_counted(data: Path) -> None:
    got = take(data / "even.yaml", Counted(), 0, 250)
    keys = [k for batch in got for k in batch]
    share = sum(k.startswith("a:") for k in keys) / len(keys)
    assert abs(share - 0.5) <= 0.03
    with loader(data / "even.yaml", Counted(), 0) as plain:
        next(iter(plain))
        streams = plain.save_state_rank()
    with loader(data / "even.yaml", Tokens(), 0) as sized:
        next(iter(sized))
        sized_streams = sized.save_state_rank()
    # a stream's position: counts per dataset and skip; a sized blend adds a total per dataset
    assert len(streams["streams"]["0"]) == 3
    assert len(sized_streams["streams"]["0"]) == 5 and sum(sized_streams["streams"]["0"][2:4]) > 0


def test_a_schedule_moves_the_totals_to_the_weights_at_the_batch(data: Path) -> None:
    got = take(data / "stepped.yaml", Tokens(), 0, 500)
    early = tokens(got[:100])
    assert abs(early["a"] / early["b"] - 1) <= 0.1, early  # 1:1 on batches 0..99
    totals = tokens(got)
    assert abs(totals["a"] / totals["b"] - 3) <= 0.09, totals  # then 3:1, over the totals


@pytest.mark.parametrize("workers", [0, 2])
def test_restore_mid_run_continues_exactly(data: Path, workers: int) -> None:
    with loader(data / "stepped.yaml", Tokens(), workers) as first:
        it = iter(first)
        for _ in range(120):
            next(it)
        state = roundtrip(first.save_state_rank())
        expected = [next(it) for _ in range(80)]
    with loader(data / "stepped.yaml", Tokens(), workers) as second:
        second.restore_state_rank(state)
        it = iter(second)
        assert [next(it) for _ in range(80)] == expected
    assert len(json.dumps(state)) < 4000
