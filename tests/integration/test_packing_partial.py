"""``PartialSample``: a sample split at a token boundary; its tail leads a later pack."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import PackedSamplesOutput, PartialSample, stateless
from tests.integration.test_packing import MAX_LEN, Packing, lengths_by_id, make_loader, write_texts


def window(sample: Any) -> tuple[Any, int, int]:
    """The whole sample and the token range of a (possibly partial) buffered sample."""
    if isinstance(sample, PartialSample):
        return sample.sample, *sample.slice
    return sample, 0, len(sample["tokens"])


class Split(Packing):
    """Fills each pack to exactly MAX_LEN tokens in buffer order, splitting the sample that does
    not fit: its head ends this pack, its tail is pushed back ahead of the rest."""

    packing_capacity = MAX_LEN

    def packing_sample_size(self, sample: Any) -> int:
        _, start, stop = window(sample)
        return stop - start

    def select_samples_to_pack(self, samples: list[Any]) -> PackedSamplesOutput[Any]:
        pack: list[Any] = []
        pushback: list[Any] = []
        room = MAX_LEN
        for sample in samples:
            whole, start, stop = window(sample)
            if room == 0:
                pushback.append(sample)
            elif stop - start <= room:
                pack.append(sample)
                room -= stop - start
            else:
                pack.append(PartialSample(sample=whole, slice=(start, start + room)))
                pushback.append(PartialSample(sample=whole, slice=(start + room, stop)))
                room = 0
        return PackedSamplesOutput(packs=[pack], pushback=pushback)

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        return {**super().encode_sample(sample), "__restore_key__": sample["__restore_key__"]}

    @stateless
    def postencode_sample(self, sample: Any) -> dict[str, Any]:
        whole, start, stop = window(sample)
        return {"__restore_key__": whole["__restore_key__"], "id": whole["id"], "start": start,
                "tokens": whole["tokens"][start:stop]}  # fmt: skip

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        parts = [(s["id"], s["start"], s["start"] + len(s["tokens"])) for s in samples]
        tokens = torch.cat([s["tokens"] for s in samples])
        return {"__restore_key__": (), "parts": parts, "tokens": tokens}

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {"parts": [s["parts"] for s in samples], "tokens": [s["tokens"] for s in samples]}


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("partial") / "texts.jsonl", 40)


def loader_of(texts: Path, workers: int, **options: Any) -> Any:
    options = {"repeat": False, "packing_buffer_size": 6, **options}
    return make_loader(texts, Split(6), workers, **options)


@pytest.mark.parametrize("workers", [0, 2])
def test_every_token_arrives_once_and_packs_are_full(texts: Path, workers: int) -> None:
    with loader_of(texts, workers) as loader:
        batches = list(loader)
        stats = loader.stats().packing
    lengths = lengths_by_id(texts)
    parts = [p for batch in batches for pack in batch["parts"] for p in pack]
    covered: dict[int, list[tuple[int, int]]] = {}
    for i, start, stop in parts:
        covered.setdefault(i, []).append((start, stop))
    assert sorted(covered) == sorted(lengths)
    for i, ranges in covered.items():
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == lengths[i]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert any(len(r) > 1 for r in covered.values()), "the test must split samples"
    packs = [t for batch in batches for t in batch["tokens"]]
    full = sum(len(t) == MAX_LEN for t in packs)
    assert full >= len(packs) - 2 * 2  # all but each stream's last pack(s)
    assert stats["fill_ratio"] == pytest.approx(sum(lengths.values()) / (MAX_LEN * len(packs)))


def test_restore_sample_rebuilds_a_pack_with_partial_samples(texts: Path) -> None:
    with loader_of(texts, 0, batch_size=None) as loader:
        packs = [pack for pack, _ in zip(loader, range(8), strict=False)]
        split = [p for p in packs if any(s > 0 for _, s, _ in p["parts"])]
        assert split, "the test must restore a pack holding a sample's tail"
        for pack in split:
            assert any(k[0] == "PartialSample" for k in pack["__restore_key__"][2:])
            again = loader.restore_sample(pack["__restore_key__"])
            assert again["parts"] == pack["parts"]
            assert torch.equal(again["tokens"], pack["tokens"])
