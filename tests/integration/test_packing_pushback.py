"""``select_samples_to_pack`` returning ``PackedSamplesOutput``: pushed-back samples stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker import PackedSamplesOutput
from stoker.errors import StokerError
from tests.integration.test_packing import MAX_LEN, Packing, lengths_by_id, make_loader, write_texts


class PushBack(Packing):
    """Next-fit in buffer order (so the order matters); packs the bins of at least ``min_fill``
    tokens and pushes the other samples back in reverse order. ``drop`` samples of each round
    are neither packed nor pushed back. Records each buffer's ids and those pushed back."""

    def __init__(self, buffer_size: int, min_fill: int = 0, drop: int = 0) -> None:
        super().__init__(buffer_size, min_fill)
        self.drop = drop
        self.calls: list[tuple[list[int], list[int]]] = []  # (buffer, pushed back) ids

    def select_samples_to_pack(self, samples: list[Any]) -> PackedSamplesOutput[Any]:
        bins: list[list[Any]] = [[]]
        for s in samples:
            if sum(len(t["tokens"]) for t in bins[-1]) + len(s["tokens"]) > MAX_LEN:
                bins.append([])
            bins[-1].append(s)
        last = len(samples) < self.buffer_size
        packs = [b for b in bins if last or sum(len(s["tokens"]) for s in b) >= self.min_fill]
        rest = [s for b in bins if b not in packs for s in b]
        pushback = rest[self.drop :][::-1]
        self.calls.append(([s["id"] for s in samples], [s["id"] for s in pushback]))
        return PackedSamplesOutput(packs=packs, pushback=pushback)


def _loader(texts: Path, encoder: Packing) -> Any:
    """One stream (one virtual worker), so consecutive selections are of the same buffer."""
    return make_loader(texts, encoder, 0, repeat=False, virtual_workers=1,
                       packing_buffer_size=encoder.buffer_size)  # fmt: skip


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("pushback") / "texts.jsonl", 40)


def test_pushed_back_samples_lead_the_next_buffer_in_the_order_given(texts: Path) -> None:
    encoder = PushBack(8, min_fill=13)
    with _loader(texts, encoder) as loader:
        packs = [pack for batch in loader for pack in batch["ids"]]
    assert sorted(i for pack in packs for i in pack) == sorted(lengths_by_id(texts))
    pushed = [p for _, p in encoder.calls]
    assert sum(bool(p) for p in pushed) >= 3, "the test must exercise push-back"
    for (_, before), (after, _) in zip(encoder.calls, encoder.calls[1:], strict=False):
        assert after[: len(before)] == before


def test_samples_neither_packed_nor_pushed_back_are_dropped_and_counted(texts: Path) -> None:
    encoder = PushBack(8, min_fill=13, drop=1)
    with _loader(texts, encoder) as loader:
        packs = [pack for batch in loader for pack in batch["ids"]]
        skipped = loader.skipped().by_reason
    dropped = skipped["select_samples_to_pack: neither packed nor pushed back"]
    assert dropped > 0
    assert len({i for pack in packs for i in pack}) + dropped == len(lengths_by_id(texts))


class Foreign(Packing):
    def select_samples_to_pack(self, samples: list[Any]) -> PackedSamplesOutput[Any]:
        return PackedSamplesOutput(packs=[samples[:1]], pushback=[dict(samples[1])])


def test_pushing_back_a_sample_not_in_the_buffer_is_an_error(texts: Path) -> None:
    with _loader(texts, Foreign(4)) as loader, pytest.raises(StokerError, match="pushed back"):
        list(loader)


class Sized(PushBack):
    """PushBack with the optional size hooks, so stats report a fill ratio."""

    packing_capacity = MAX_LEN

    def packing_sample_size(self, sample: Any) -> int:
        return len(sample["tokens"])


@pytest.mark.parametrize("workers", [0, 2])
def test_stats_report_packs_push_back_and_fill_ratio(texts: Path, workers: int) -> None:
    encoder = Sized(8, min_fill=13)
    with make_loader(texts, encoder, workers, repeat=False,
                     packing_buffer_size=8) as loader:  # fmt: skip
        packs = [pack for batch in loader for pack in batch["ids"]]
        stats = loader.stats().packing
        flat = loader.stats().flat()
    lengths = lengths_by_id(texts)
    assert stats["packs"] == len(packs)
    assert stats["samples_per_pack"] == pytest.approx(len(lengths) / len(packs))
    assert stats["pushed_back"] > 0
    used = sum(lengths[i] for pack in packs for i in pack)
    assert stats["fill_ratio"] == pytest.approx(used / (MAX_LEN * len(packs)))
    assert flat["data/packing/packs"] == len(packs)
