"""The save/restore contract with packing and grouping buffers, and elastic restores."""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import stateless
from stoker.pipeline.refs import decode_groups
from stoker.runtime.loader import Loader
from tests.contract.contract import fingerprint, roundtrip, run_contract, take
from tests.integration.test_packing import (
    GeneratorHooks,
    Grouping,
    Packing,
    make_loader,
    write_texts,
)
from tests.integration.test_packing_partial import Split
from tests.integration.test_packing_pushback import PushBack

MIDPOINTS = [0, 1, 2, 3, 5, 8, 11, 14, 17]


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("packing_contract") / "texts.jsonl", 48)


class RandomPacking(Packing):
    """Random augmentation before and after packing: restored seeds must reproduce it."""

    @stateless(restore_seeds=True)
    def preencode_sample(self, sample: Any) -> Any:
        return {**sample, "r": random.random()}

    @stateless(restore_seeds=True)
    def postencode_sample(self, sample: Any) -> Any:
        return {**sample, "tokens": sample["tokens"] + torch.randint(0, 2, (1,))}


class PackedGroups(Packing):
    """Packing, then packs grouped by how many samples they hold (1-2: 2, more: 3)."""

    def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
        many = len(sample["ids"]) > 2
        return many, 3 if many else 2


def loaders(texts: Path, encoder: Any, workers: int, **options: Any) -> Callable[[], Loader]:
    return lambda: make_loader(texts, encoder, workers, **options)


def saved_buffers(make: Callable[[], Loader], steps: int) -> list[Any]:
    """The buffers saved after each of the first ``steps`` batches."""
    out = []
    with make() as loader:
        for _ in loader:
            out.append(roundtrip(loader.save_state_rank()).get("buffers"))
            if len(out) == steps:
                break
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("repeat", [True, False])
def test_contract_packing(texts: Path, workers: int, repeat: bool) -> None:
    make = loaders(texts, RandomPacking(8, min_fill=13), workers, repeat=repeat,
                   packing_buffer_size=8)  # fmt: skip
    assert any(saved_buffers(make, 10)), "the contract must cover non-empty packing buffers"
    run_contract(make, total=22, midpoints=MIDPOINTS)


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_packing_with_generator_hooks(texts: Path, workers: int) -> None:
    make = loaders(texts, GeneratorHooks(6), workers, batch_size=3, packing_buffer_size=6)
    run_contract(make, total=20, midpoints=MIDPOINTS)


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_packing_with_pushback(texts: Path, workers: int) -> None:
    """Pushed-back samples are restored into the buffer in their order (the selection, next-fit
    in buffer order, depends on it)."""
    encoder = PushBack(8, min_fill=13)
    make = loaders(texts, encoder, workers, repeat=False, packing_buffer_size=8)
    assert any(saved_buffers(make, 10)), "the contract must cover non-empty packing buffers"
    run_contract(make, total=16, midpoints=MIDPOINTS[:-1])
    if workers == 0:  # (at W=2 the selections run in the workers)
        assert sum(bool(pushed) for _, pushed in encoder.calls) >= 3


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_packing_with_partial_samples(texts: Path, workers: int) -> None:
    """Restores in the middle of split samples (their tails in the buffer) continue exactly."""
    make = loaders(texts, Split(6), workers, repeat=True, packing_buffer_size=6)
    buffers = saved_buffers(make, 10)
    assert any(b and any("slices" in v.get("pack", {}) for v in b.values()) for b in buffers)
    run_contract(make, total=18, midpoints=MIDPOINTS)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("repeat", [True, False])
def test_contract_grouping(texts: Path, workers: int, repeat: bool) -> None:
    make = loaders(texts, Grouping(), workers, repeat=repeat, group_batches=True)
    buffers = saved_buffers(make, 10)
    assert any(b and any("group" in v for v in b.values()) for b in buffers)
    run_contract(make, total=26, midpoints=[*MIDPOINTS, 20, 23])


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_packing_then_grouping(texts: Path, workers: int) -> None:
    make = loaders(texts, PackedGroups(7, min_fill=12), workers, repeat=False,
                   packing_buffer_size=7, group_batches=True)  # fmt: skip
    buffers = saved_buffers(make, 8)
    assert any(b and any({"pack", "group"} <= set(v) for v in b.values()) for b in buffers)
    run_contract(make, total=14, midpoints=[0, 1, 2, 4, 6, 9, 12])


def test_packing_state_is_plain_and_grows_with_the_buffer(texts: Path) -> None:
    make = loaders(texts, Packing(20, min_fill=16), 0, packing_buffer_size=20)
    with make() as loader:
        take(loader, 3)
        state = loader.save_state_rank()
    assert state == roundtrip(state)
    held = [stream["pack"] for stream in state["buffers"].values()]
    groups = [decode_groups(h["refs"])[h["popped"] :] for h in held]
    refs = sum(len(g) for stage in groups for g in stage)
    assert 0 < refs <= 2 * 20 + 20  # the buffer, and the groups selected from one before
    assert all(len(ref) == 4 for stage in groups for g in stage for ref in g)


def _rank_loaders(texts: Path, world: int, workers: int) -> list[Loader]:
    options: dict[str, Any] = {"virtual_workers": 4, "packing_buffer_size": 8}
    encoder = RandomPacking(8, min_fill=13)
    return [
        make_loader(texts, encoder, workers, world=world, rank=r, **options) for r in range(world)
    ]


def _global(loaders: list[Loader], steps: int) -> list[Any]:
    iterators = [iter(loader) for loader in loaders]
    return [fingerprint(next(it)) for _ in range(steps) for it in iterators]


@pytest.mark.parametrize(("world", "workers"), [(2, 2), (1, 4), (4, 1), (1, 0)])
def test_elastic_restore_with_packing(texts: Path, world: int, workers: int) -> None:
    reference = _global(_rank_loaders(texts, 2, 2), 12)  # 24 global micro-batches
    saved = _rank_loaders(texts, 2, 2)
    _global(saved, 4)  # 8 micro-batches consumed
    states = [roundtrip(loader.save_state_rank()) for loader in saved]
    assert any(state["buffers"] for state in states)
    resumed = _rank_loaders(texts, world, workers)
    for loader in resumed:
        loader.restore_state_global(states)
    assert _global(resumed, 16 // world) == reference[8:24]
    for loader in [*saved, *resumed]:
        loader.close()


def test_restore_needs_the_same_packing_configuration(texts: Path) -> None:
    from stoker.errors import ConfigError

    with loaders(texts, Packing(8), 0, packing_buffer_size=8)() as loader:
        take(loader, 2)
        state = roundtrip(loader.save_state_rank())
    other = loaders(texts, Packing(9), 0, packing_buffer_size=9)()
    with other, pytest.raises(ConfigError, match="packing_buffer_size: saved 8, current 9"):
        other.restore_state_rank(state)
