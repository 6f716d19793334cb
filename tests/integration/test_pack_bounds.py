"""Packing and grouping buffers are bounded, and their state is made once per round."""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest

from stoker import SkipSample, stateless
from stoker.errors import StokerError
from stoker.pipeline import group as group_module
from stoker.pipeline.refs import decode_groups, encode_groups
from tests.contract.contract import roundtrip, take
from tests.integration.test_packing import Grouping, Packing, make_loader, write_texts


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("pack_bounds") / "texts.jsonl", 40)


class Stuck(Packing):
    """Selects nothing from a full buffer (or raises SkipSample), at most 3 rounds in a row."""

    def __init__(self, buffer_size: int, skip: bool = False) -> None:
        super().__init__(buffer_size)
        self.skip, self.seen = skip, [0]

    @stateless(failure_tolerance=3)
    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        self.seen[0] = max(self.seen[0], len(samples))
        if self.skip:
            raise SkipSample()
        return []


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("skip", [False, True])
def test_a_selection_that_takes_nothing_stops_with_the_hook_named(
    texts: Path, workers: int, skip: bool
) -> None:
    encoder = Stuck(6, skip=skip)
    loader = make_loader(texts, encoder, workers, packing_buffer_size=6)
    with loader, pytest.raises(StokerError) as caught:
        take(loader, 1)
    message = str(caught.value)
    assert "select_samples_to_pack selected nothing from a full packing buffer 3 times" in message
    assert "packing_buffer_size=6" in message and "failure_tolerance" in message
    if workers == 0:  # the buffer grew by at most the rounds allowed
        assert encoder.seen[0] == 6 + 2


def test_a_selection_that_takes_something_again_resets_the_count(texts: Path) -> None:
    class Sometimes(Packing):
        rounds = itertools.count()

        @stateless(failure_tolerance=2)
        def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
            if next(self.rounds) % 2 and len(samples) >= self.buffer_size:
                return []  # every other round takes nothing: never 2 in a row
            return super().select_samples_to_pack(samples)

    with make_loader(texts, Sometimes(5), 0, packing_buffer_size=5, repeat=False) as loader:
        ids = [i for batch in loader for pack in batch["ids"] for i in pack]
    assert sorted(ids) == list(range(40))


@pytest.mark.parametrize("workers", [0, 2])  # workers are forked: they see the patched cap
def test_too_many_filling_groups_stop_with_the_hook_named(
    texts: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    class OneKeyEach(Grouping):
        def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
            return sample["id"], 2  # no two samples share a key: no group ever fills

    monkeypatch.setattr(group_module, "MAX_OPEN_GROUPS", 5)
    loader = make_loader(texts, OneKeyEach(), workers, group_batches=True)
    with loader, pytest.raises(StokerError, match="batch_group_criterion gave key") as caught:
        take(loader, 1)
    assert "5 groups are already filling (5 samples held" in str(caught.value)


def test_pack_state_is_made_once_per_round(texts: Path) -> None:
    """The batches of one round carry the same encoded references, a count of packed groups."""
    with make_loader(texts, Packing(20), 0, packing_buffer_size=20, virtual_workers=1,
                     batch_size=1) as loader:  # fmt: skip
        held = []
        for _ in range(6):
            take(loader, 1)
            held.append(loader.save_state_rank()["buffers"]["0"]["pack"])
    assert isinstance(held[0]["refs"], str) and held[0]["refs"].startswith("refs1:")
    same = [h for h in held if h["refs"] is held[0]["refs"]]
    assert len(same) >= 3  # FFD of 20 samples gives several packs per round
    assert [h["popped"] for h in same] == sorted({h["popped"] for h in same})


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_in_the_older_flat_layout_restores(texts: Path, workers: int) -> None:
    def loader() -> Any:
        return make_loader(texts, Packing(9, min_fill=12), workers, packing_buffer_size=9)

    with loader() as first:
        take(first, 3)
        state = roundtrip(first.save_state_rank())
        expected = take(first, 6)
    older = roundtrip(state)
    for stream in older["buffers"].values():
        pack = stream["pack"]
        *groups, buffer = decode_groups(pack.pop("refs"))
        pack["groups"] = [[v for ref in g for v in ref] for g in groups[pack.pop("popped") :]]
        pack["buffer"] = [v for ref in buffer for v in ref]
    for saved in (state, older):
        with loader() as resumed:
            resumed.restore_state_rank(saved)
            assert take(resumed, 6) == expected


def test_encoded_references_round_trip_and_stay_small() -> None:
    groups = [[(0, 10**12 + i, 0, 0) for i in range(3)], [], [(2, -5, 7, 1)]]
    assert decode_groups(encode_groups(groups)) == groups
    buffer = [[(i % 3, 1000 + 2 * i, 0, 0) for i in range(10_000)]]
    text = encode_groups(buffer)
    assert decode_groups(text) == buffer
    assert len(text) < 10_000  # < 1 byte per reference (40 000 ints)
    with pytest.raises(StokerError, match="references are not readable"):
        decode_groups(text[:-8])
