"""The save/restore contract over mixes of whole batches, and elastic restores of a mix."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import SkipSample, get_loader, homogeneous_concat_mix
from stoker.runtime.loader import Loader
from tests.contract.contract import fingerprint, roundtrip, run_contract
from tests.integration.test_mix_batch import Ids, make_mix, write_ids

MIDPOINTS = [0, 1, 2, 3, 5, 8, 11, 13, 17, 22]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mix_contract")
    return {"a": write_ids(root / "a.jsonl", 0, 40), "b": write_ids(root / "b.jsonl", 1000, 30)}


def loaders(data: dict[str, Path], workers: int, **options: Any) -> Callable[[], Loader]:
    return lambda: get_loader(make_mix(data, workers, **options))


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_mix(data: dict[str, Path], workers: int) -> None:
    # ~3 epochs of "a" (5 sub-batches per stream and epoch) over 30 outputs of 3 sub-batches
    make = loaders(data, workers, batch_mix_fn=homogeneous_concat_mix)
    run_contract(make, total=30, midpoints=MIDPOINTS)


def first_alone_unless_all_b(batches: list[Any]) -> Iterator[Any]:
    """Two outputs per group (the first sub-batch, then the rest); groups of only "b" skipped."""
    if all(batch["ids"][0] >= 1000 for batch in batches):
        raise SkipSample()
    yield batches[0]
    yield homogeneous_concat_mix(batches[1:])


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_mix_fn_generator_and_skip(data: dict[str, Path], workers: int) -> None:
    make = loaders(data, workers, batch_mix_fn=first_alone_unless_all_b, weights=(0.3, 0.7))
    with make() as loader:
        sizes, skips = [], []
        for batch in itertools.islice(loader, 40):
            sizes.append(len(batch["ids"]))
            skips += [p[-1] for p in loader.save_state_rank()["streams"].values()]
    # one sub-batch (2-3 samples), then two (4-6): a restore lands inside groups too
    assert min(sizes) <= 3 and 4 <= max(sizes) <= 6
    assert 1 in skips and 0 in skips
    run_contract(make, total=30, midpoints=MIDPOINTS)


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_mix_of_finite_datasets(data: dict[str, Path], workers: int) -> None:
    # One pass: 40 / 2 + 30 / 3 = 30 sub-batches, 10 outputs of 3 (datasets run out one by one).
    make = loaders(data, workers, repeat=False, batch_mix_fn=homogeneous_concat_mix)
    run_contract(make, total=24, midpoints=[0, 1, 4, 7, 9, 10, 11, 15, 20])


class ShortLong(Ids):
    """Groups samples into short (1-2 words, pairs) and long (3-5 words, triples)."""

    def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
        short = len(sample["words"]) <= 2
        return short, 2 if short else 3


def test_contract_mix_with_grouping_buffers(data: dict[str, Path]) -> None:
    grouped = {"task_encoder": ShortLong(), "group_batches": True}
    make = loaders(data, 2, b_options=grouped, batch_mix_fn=homogeneous_concat_mix)
    with make() as loader:
        held = [roundtrip(loader.save_state_rank())["buffers"] for _ in itertools.islice(loader, 8)]
    assert any(held), "the contract must cover the buffers of a sub-dataset's grouping"
    run_contract(make, total=24, midpoints=MIDPOINTS[:-1])


def _rank_loaders(data: dict[str, Path], world: int, workers: int) -> list[Loader]:
    mix_fn = homogeneous_concat_mix
    return [
        get_loader(make_mix(data, workers, world=world, rank=rank, batch_mix_fn=mix_fn))
        for rank in range(world)
    ]


def _global(loaders: list[Loader], steps: int) -> list[Any]:
    """Global micro-batches in canonical order: step t holds rank 0's, rank 1's, ..."""
    iterators = [iter(loader) for loader in loaders]
    return [fingerprint(next(it)) for _ in range(steps) for it in iterators]


@pytest.mark.parametrize(("world", "workers"), [(1, 4), (4, 1), (1, 0)])
def test_elastic_restore_of_a_mix(data: dict[str, Path], world: int, workers: int) -> None:
    reference = _global(_rank_loaders(data, 2, 2), 12)  # 24 global micro-batches
    saved = _rank_loaders(data, 2, 2)
    _global(saved, 4)  # 8 micro-batches consumed
    states = [roundtrip(loader.save_state_rank()) for loader in saved]
    resumed = _rank_loaders(data, world, workers)
    for loader in resumed:
        loader.restore_state_global(states)
    assert _global(resumed, 16 // world) == reference[8:24]
    for loader in [*saved, *resumed]:
        loader.close()
