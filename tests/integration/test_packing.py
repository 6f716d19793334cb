"""Sequence packing and grouped batching through the task encoder, over real loaders."""

from __future__ import annotations

import collections
import json
import logging
import random
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    first_fit_decreasing,
    get_loader,
    get_train_dataset,
    stateless,
)
from stoker.errors import ConfigError
from stoker.format.jsonl import prepare_jsonl
from stoker.runtime.loader import Loader

#: Tokens per pack.
MAX_LEN = 16


def write_texts(path: Path, n: int, seed: int = 0, extra: tuple[str, ...] = ()) -> Path:
    """``n`` JSONL lines of 1..10 words (plus ``extra`` texts), indexed for stoker."""
    rng = random.Random(seed)
    texts = [" ".join(f"w{rng.randrange(50)}" for _ in range(rng.randint(1, 10))) for _ in range(n)]
    lines = [{"id": i, "text": t} for i, t in enumerate([*texts, *extra])]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    prepare_jsonl(str(path))
    return path


class Packing(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Tokenizes words, packs with FFD to MAX_LEN, builds position ids and a block mask.

    With ``min_fill``, a round takes only bins of at least that many tokens, except from the
    stream's last (smaller) buffer: the others stay in the buffer for later rounds.
    """

    def __init__(self, buffer_size: int, min_fill: int = 0) -> None:
        super().__init__()
        self.buffer_size, self.min_fill = buffer_size, min_fill

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        words = sample["json"]["text"].split()
        tokens = torch.tensor([int(w[1:]) + 1 for w in words], dtype=torch.int64)
        return {"__key__": sample["__key__"], "id": sample["json"]["id"], "tokens": tokens}

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        bins = first_fit_decreasing([len(s["tokens"]) for s in samples], MAX_LEN)
        last = len(samples) < self.buffer_size  # the stream's last buffer: take every bin
        used = [sum(len(samples[i]["tokens"]) for i in b) for b in bins]
        keep = [last or n >= self.min_fill for n in used]
        return [[samples[i] for i in b] for b, ok in zip(bins, keep, strict=True) if ok]

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        return pack_tokens(samples)

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {
            "ids": [s["ids"] for s in samples],
            "tokens": torch.stack([s["tokens"] for s in samples]),
            "position_ids": torch.stack([s["position_ids"] for s in samples]),
            "attention_mask": torch.stack([s["attention_mask"] for s in samples]),
        }


def pack_tokens(samples: list[Any]) -> dict[str, Any]:
    """One padded sequence of MAX_LEN tokens; each sample attends only to itself (causal)."""
    tokens = torch.zeros(MAX_LEN, dtype=torch.int64)
    position_ids = torch.zeros(MAX_LEN, dtype=torch.int64)
    mask = torch.zeros(MAX_LEN, MAX_LEN, dtype=torch.bool)
    at = 0
    for s in samples:
        n = len(s["tokens"])
        tokens[at : at + n] = s["tokens"]
        position_ids[at : at + n] = torch.arange(n)
        mask[at : at + n, at : at + n] = torch.tril(torch.ones(n, n, dtype=torch.bool))
        at += n
    return {"ids": [s["id"] for s in samples], "tokens": tokens, "position_ids": position_ids,
            "attention_mask": mask, "used": at}  # fmt: skip


class Grouping(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Groups samples by word count: short (batches of 2), medium (3), long (4)."""

    SIZES: ClassVar[dict[str, int]] = {"short": 2, "medium": 3, "long": 4}

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        return {"__key__": sample["__key__"], "id": sample["json"]["id"],
                "words": len(sample["json"]["text"].split())}  # fmt: skip

    def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
        group = group_of(sample["words"])
        return group, self.SIZES[group]

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {
            "ids": [s["id"] for s in samples],
            "groups": [group_of(s["words"]) for s in samples],
        }


def group_of(words: int) -> str:
    return "short" if words <= 3 else "medium" if words <= 6 else "long"


def make_loader(
    path: Path, encoder: Any, workers: int = 0, *, world: int = 1, rank: int = 0, **options: Any
) -> Loader:
    config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
    defaults: dict[str, Any] = {"batch_size": 2, "shuffle_buffer_size": 5,
                                "max_samples_per_sequence": 4, "virtual_workers": 2}  # fmt: skip
    dataset = get_train_dataset(
        str(path), worker_config=config, task_encoder=encoder, **{**defaults, **options}
    )
    return get_loader(dataset)


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("packing") / "texts.jsonl", 60)


def lengths_by_id(path: Path) -> dict[int, int]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return {line["id"]: len(line["text"].split()) for line in lines}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("buffer_size", [1, 7, 100])
def test_every_sample_is_in_exactly_one_pack_within_budget(
    texts: Path, workers: int, buffer_size: int
) -> None:
    with make_loader(texts, Packing(buffer_size), workers, repeat=False,
                     packing_buffer_size=buffer_size) as loader:  # fmt: skip
        batches = list(loader)
    lengths = lengths_by_id(texts)
    packs = [(ids, batch, row) for batch in batches for row, ids in enumerate(batch["ids"])]
    assert sorted(i for ids, _, _ in packs for i in ids) == sorted(lengths)
    for ids, batch, row in packs:
        used = sum(lengths[i] for i in ids)
        assert used <= MAX_LEN
        expected = torch.cat([torch.arange(lengths[i]) for i in ids])
        assert torch.equal(batch["position_ids"][row, :used], expected)
        mask = batch["attention_mask"][row]
        assert int(mask.sum()) == sum(lengths[i] * (lengths[i] + 1) // 2 for i in ids)
        assert not mask[:, used:].any()
    if buffer_size > 1:  # FFD over a buffer packs tighter than one sample per pack
        assert len(packs) < len(lengths) / 2


@pytest.mark.parametrize("min_fill", [12, 16])
def test_samples_left_out_of_a_round_stay_for_later_rounds(texts: Path, min_fill: int) -> None:
    encoder = Packing(10, min_fill=min_fill)
    with make_loader(texts, encoder, repeat=False, packing_buffer_size=10) as loader:
        packs = [pack for batch in loader for pack in batch["ids"]]
    lengths = lengths_by_id(texts)
    assert sorted(i for pack in packs for i in pack) == sorted(lengths)
    fill = [sum(lengths[i] for i in pack) for pack in packs]
    assert sum(f >= min_fill for f in fill) >= len(packs) - 4  # all but the last buffers'


def test_a_sample_that_never_fits_is_reported_not_dropped_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    too_long = " ".join(f"w{i}" for i in range(MAX_LEN + 3))
    path = write_texts(tmp_path / "t.jsonl", 20, extra=(too_long,))
    loader = make_loader(path, Packing(8), repeat=False, packing_buffer_size=8)
    with caplog.at_level(logging.WARNING, logger="stoker"), loader:
        ids = [i for batch in loader for pack in batch["ids"] for i in pack]
    assert sorted(ids) == list(range(20))  # every other sample was packed
    never = [r for r in caplog.records if "never selected" in r.getMessage()]
    assert len(never) == 1
    assert "'20'" in never[0].getMessage()  # the key (line number) of the long sample
    assert "t.jsonl, sample #20" in never[0].getMessage()  # its source


class GeneratorHooks(Packing):
    """postencode_sample and pack_selected_samples as generators (two packs per group)."""

    @stateless(restore_seeds=True)
    def postencode_sample(self, sample: Any) -> Iterator[Any]:
        yield {**sample, "noise": torch.rand(1)}

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> Iterator[dict[str, Any]]:
        assert all("noise" in s for s in samples)
        yield pack_tokens(samples)
        yield pack_tokens(samples[::-1])


def test_generator_hooks_give_every_output(texts: Path) -> None:
    with make_loader(texts, GeneratorHooks(9), repeat=False, packing_buffer_size=9) as loader:
        packs = [pack for batch in loader for pack in batch["ids"]]
    assert all(a == b[::-1] for a, b in zip(packs[::2], packs[1::2], strict=True))
    assert sorted(i for pack in packs[::2] for i in pack) == sorted(lengths_by_id(texts))


@pytest.mark.parametrize("workers", [0, 2])
def test_grouped_batches_hold_one_group_of_its_size(texts: Path, workers: int) -> None:
    with make_loader(texts, Grouping(), workers, repeat=False, group_batches=True) as loader:
        batches = list(loader)
    ids = [i for b in batches for i in b["ids"]]
    assert sorted(ids) == sorted(lengths_by_id(texts))  # partial buckets flushed at the end
    partial: collections.Counter[str] = collections.Counter()
    for b in batches:
        assert len(set(b["groups"])) == 1
        group = b["groups"][0]
        size = Grouping.SIZES[group]
        assert len(b["ids"]) <= size
        partial[group] += len(b["ids"]) < size
    assert all(n <= 2 for n in partial.values())  # at most one partial per group per stream


def test_grouping_drop_last_drops_only_partial_buckets(texts: Path) -> None:
    with make_loader(texts, Grouping(), repeat=False, group_batches=True,
                     batch_drop_last=True) as loader:  # fmt: skip
        batches = list(loader)
    assert all(len(b["ids"]) == Grouping.SIZES[b["groups"][0]] for b in batches)


def test_grouping_can_be_turned_off(texts: Path) -> None:
    """group_batches=False turns off the grouping an overridden batch_group_criterion implies."""
    with make_loader(texts, Grouping(), repeat=False, batch_size=5, group_batches=False) as loader:
        sizes = [len(b["ids"]) for b in loader]
    assert set(sizes[:-1]) == {5}


def test_packing_needs_the_hooks(texts: Path) -> None:
    loader = make_loader(texts, DefaultTaskEncoder(), packing_buffer_size=4)
    with loader, pytest.raises(NotImplementedError, match="select_samples_to_pack"):
        next(iter(loader))
    with pytest.raises(ConfigError, match="packing_buffer_size"):
        make_loader(texts, Packing(1), packing_buffer_size=0)
