"""stoker.model.sample_format: Energon's sample_utils text formats for samples and batches."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from stoker.model.sample_format import (
    default_get_batch_keys,
    format_sample_compact,
    format_sample_detailed,
)


@dataclass
class _Item:
    n: int
    tags: dict[str, int]


def test_detailed_renders_block_yaml_with_tensor_summaries() -> None:
    sample = {
        "flags": {"b": False, "n": None},
        "pair": (1, "x"),
        "tensor": torch.tensor([0.0, 2.0]),
        "long": torch.arange(10),
        "array": np.array([4, 5], dtype=np.int64),
        "item": _Item(n=3, tags={"a": 1}),
    }
    lines = format_sample_detailed(sample).splitlines()
    assert lines[:6] == ["flags:", "  b: false", "  n: null", "pair:", "- 1", "- x"]
    assert lines[6] == (
        "tensor: Tensor(shape=torch.Size([2]), dtype=torch.float32, device=cpu, min=0.0, "
        "max=2.0, values=[0.0, 2.0])"
    )
    assert lines[7].endswith("min=0, max=9, values=[0, 1, 2, ..., 7, 8, 9])")
    assert lines[8].startswith("array: np.ndarray(shape=(2,), dtype=int64, min=4, max=5, ")
    assert lines[9:] == ["item:", "  _Item:", "    n: 3", "    tags:", "      a: 1"]


def test_detailed_cuts_long_containers_and_indents() -> None:
    out = format_sample_detailed({"xs": list(range(12)), "s": "a\nb"}, indent="> ")
    assert "> - '... and 2 more items'" in out.splitlines()
    assert all(line.startswith("> ") for line in out.splitlines() if line)


def test_compact_is_one_line_and_truncates() -> None:
    out = format_sample_compact({"__key__": "k/0", "text": "y" * 80, "deep": [[[[1]]]]})
    assert "\n" not in out
    assert out.startswith("{__key__: 'k/0', text: '" + "y" * 50 + "...'")
    assert out.endswith("deep: [[[...]]]}")
    assert format_sample_compact(torch.zeros(2, 3)).startswith("Tensor(shape=torch.Size([2, 3])")


def test_batch_keys_from_attributes_and_dicts() -> None:
    class _Batch:
        def __init__(self) -> None:
            self.__keys__ = ["s/0", "s/1"]

    assert default_get_batch_keys(_Batch()) == ["s/0", "s/1"]
    assert default_get_batch_keys({"keys": ["a"]}) == ["a"]
    assert default_get_batch_keys([{"__key__": ["b"]}, {"__key__": ["c"]}]) == ["b"]
    assert default_get_batch_keys({"text": "no keys"}) is None
