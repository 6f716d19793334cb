"""The token-budget packer with partial samples on long-tailed lengths: full packs, every token
exactly once, exact restore in the middle of a split sample, and elastic resume 2x2 -> 1x4."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from tests.integration._budget_data import CAPACITY, budget_loader, write_lengths


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, int]]:
    path = tmp_path_factory.mktemp("budget") / "lengths.jsonl"
    return path, write_lengths(path, 3000)


def parts_of(batches: list[Any]) -> list[list[tuple[int, int, int]]]:
    """The packs of ``batches``, each a list of ``(id, start, stop)``."""
    return [[tuple(p) for p in pack] for batch in batches for pack in batch]


def coverage(packs: list[list[tuple[int, int, int]]]) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for pack in packs:
        for i, start, stop in pack:
            out.setdefault(i, []).append((start, stop))
    return {i: sorted(ranges) for i, ranges in out.items()}


@pytest.mark.parametrize("workers", [0, 2])
def test_packs_are_99_percent_full_and_every_token_arrives_once(
    data: tuple[Path, dict[int, int]], workers: int
) -> None:
    path, lengths = data
    with budget_loader(path, workers, repeat=False, virtual_workers=2) as loader:
        batches = list(loader)
        stats = loader.stats().packing
    packs = parts_of(batches)
    covered = coverage(packs)
    assert sorted(covered) == sorted(lengths)  # every sample, by key
    for i, ranges in covered.items():  # every token once, by offsets: [0, n) without gaps
        assert ranges[0][0] == 0 and ranges[-1][1] == lengths[i], (i, ranges)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges)), (i, ranges)
    sizes = [sum(stop - start for _, start, stop in pack) for pack in packs]
    assert max(sizes) <= CAPACITY
    fill = sum(lengths.values()) / (CAPACITY * len(packs))
    assert fill >= 0.99, f"fill ratio {fill:.4f} over {len(packs)} packs"
    assert sum(len(r) > 1 for r in covered.values()) > 10, "the test must split samples"
    assert stats["fill_ratio"] == pytest.approx(fill)
    assert stats["padding_share"] == pytest.approx(1 - fill)
    assert stats["partial_samples"] == sum(len(r) for r in covered.values() if len(r) > 1)


def test_restore_in_the_middle_of_a_split_sample_continues_exactly(
    data: tuple[Path, dict[int, int]],
) -> None:
    path, lengths = data
    with budget_loader(path, 0) as loader:
        reference = list(itertools.islice(loader, 40))
    # The first batch after which some sample has arrived in part only.
    seen: dict[int, int] = {}
    at = None
    for k, batch in enumerate(reference[:-5]):
        for i, start, stop in (p for pack in batch for p in pack):
            seen[i] = seen.get(i, 0) + stop - start
        if any(0 < n < lengths[i] for i, n in seen.items()):
            at = k + 1
            break
    assert at is not None, "the test must save while a split sample's tail is still buffered"
    with budget_loader(path, 0) as loader:
        head = list(itertools.islice(loader, at))
        state = loader.save_state_rank()
    assert head == reference[:at]
    state = torch.load(_saved(state, path.parent / "state.pt"), weights_only=True)
    with budget_loader(path, 0) as loader:
        loader.restore_state_rank(state)
        tail = list(itertools.islice(loader, len(reference) - at))
    assert tail == reference[at:]


def _saved(state: Any, file: Path) -> Path:
    torch.save(state, file)
    return file


def test_elastic_resume_from_2x2_gloo_ranks_on_1x4_gives_the_same_packs(
    data: tuple[Path, dict[int, int]], tmp_path: Path
) -> None:
    from tests.integration._budget_rank import run_rank

    path, _ = data
    spec = {"dataset": str(path), "out": str(tmp_path), "steps": 6, "after": 8}
    mp.spawn(run_rank, args=(2, spec), nprocs=2, join=True)
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    # Global order: step s holds rank 0's micro-batch, then rank 1's.
    expected = [p for s in range(spec["after"]) for r in reports for p in r["tail"][s]]
    assert all(len(r["tail"]) == spec["after"] for r in reports)
    states = torch.load(tmp_path / "states.pt", weights_only=True)
    assert '"slices"' in json.dumps(states), "the save must hold split samples' tails"
    with budget_loader(path, 4) as loader:  # one rank: a global step is 2 of its batches
        loader.restore_state_global(states)
        got = list(itertools.islice(loader, 2 * spec["after"]))
    got_packs = json.loads(json.dumps([p for batch in got for p in batch]))
    assert got_packs == expected
