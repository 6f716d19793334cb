"""TokenBudgetPacker's selections: within the budget, every token of the buffer once (packed or
pushed back), full packs, the user's split point, and errors for bad input."""

from __future__ import annotations

import random
from typing import Any

import pytest

from stoker import PartialSample, TokenBudgetPacker, token_window
from stoker.errors import ConfigError, StokerError


def doc(i: int, n: int) -> dict[str, Any]:
    return {"id": i, "n": n}


def size(sample: dict[str, Any]) -> int:
    return int(sample["n"])


def tokens_of(samples: list[Any]) -> list[tuple[int, int]]:
    """Every token of ``samples`` as (id, offset)."""
    out = []
    for s in samples:
        whole, start, stop = token_window(s, size)
        out.extend((whole["id"], t) for t in range(start, stop))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_round_keeps_every_token_once_and_fills_packs(seed: int) -> None:
    rng = random.Random(seed)
    packer = TokenBudgetPacker(100, size, buffer_size=32)
    buffer: list[Any] = [doc(i, rng.choice([1, 7, 30, 60, 99, 250])) for i in range(32)]
    out = packer.select(buffer)
    packed = [tokens_of(pack) for pack in out.packs]
    assert out.packs, "a full buffer holding more than a pack gives at least one"
    assert all(len(p) <= 100 for p in packed)
    assert all(len(p) >= 99.5 for p in packed)  # min_fill 0.995, or filled to the brim
    everything = sorted([t for p in packed for t in p] + tokens_of(list(out.pushback)))
    assert everything == sorted(tokens_of(buffer))


def test_the_last_buffer_is_packed_in_order_all_full_but_the_last() -> None:
    packer = TokenBudgetPacker(10, size, buffer_size=100)
    buffer = [doc(0, 25), doc(1, 3), PartialSample(sample=doc(2, 9), slice=(4, 9))]
    out = packer.select(buffer)
    assert not out.pushback
    assert [len(tokens_of(p)) for p in out.packs] == [10, 10, 10, 3]
    assert sorted(t for p in out.packs for t in tokens_of(p)) == sorted(tokens_of(buffer))


def test_the_split_function_chooses_the_cut() -> None:
    cuts: list[tuple[int, int]] = []

    def at_even(sample: Any, start: int, stop: int) -> int:
        cuts.append((start, stop))
        return stop - stop % 2 if stop - stop % 2 > start else stop

    packer = TokenBudgetPacker(7, size, buffer_size=2, split=at_even)
    out = packer.select([doc(0, 5), doc(1, 5)])
    assert cuts == [(0, 2)]
    assert [token_window(s, size)[1:] for s in out.packs[0]] == [(0, 5), (0, 2)]
    assert [token_window(s, size)[1:] for s in out.pushback] == [(2, 5)]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError, match="capacity=0"):
        TokenBudgetPacker(0, size)
    with pytest.raises(ConfigError, match="min_fill=2"):
        TokenBudgetPacker(8, size, min_fill=2)
    packer = TokenBudgetPacker(4, size, buffer_size=2, split=lambda s, start, stop: stop + 1)
    with pytest.raises(StokerError, match=r"split returned 2 .* must be in \(0, 1\]"):
        packer.select([doc(0, 3), doc(1, 3)])
