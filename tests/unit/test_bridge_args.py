"""Megatron-Bridge's two call styles of its Energon data module (integrations.bridge_args)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from stoker.integrations.bridge_args import (
    CURRENT,
    LEGACY,
    bind_bridge_arguments,
    is_legacy_call,
)


def test_third_positional_argument_tells_the_style() -> None:
    assert not is_legacy_call(("/d", "tok"))
    assert not is_legacy_call(("/d", "tok", 4096))
    assert not is_legacy_call(("/d", "tok", np.int64(4096)))  # an integer of any kind
    assert is_legacy_call(("/d", "tok", object()))
    assert is_legacy_call(("/d", "tok", None))  # no image processor, in Bridge 0.3's order
    assert is_legacy_call(("/d", "tok", True))  # a bool is no sequence length


def test_positional_arguments_land_on_their_parameters() -> None:
    current, extra = bind_bridge_arguments(("/d", "tok", 64, 2, 3, 1, False), {"seed": 5})
    assert (current["seq_length"], current["micro_batch_size"], current["num_workers"]) == (
        64,
        2,
        3,
    )
    assert (current["num_val_workers"], current["pin_memory"]) == (1, False)
    assert (current["image_processor"], current["global_batch_size"]) == (None, None)
    assert extra == {"seed": 5}
    legacy, _ = bind_bridge_arguments(("/d", "tok", "proc", 64, 2, 16, 3, 1, False), {})
    assert {k: legacy[k] for k in current} == {**current, "image_processor": "proc",
                                                "global_batch_size": 16}  # fmt: skip
    defaults, _ = bind_bridge_arguments(("/d", "tok", "proc"), {})
    assert defaults["global_batch_size"] == 1  # Bridge 0.3's default
    assert defaults["seq_length"] == 2048


def test_mistakes_name_the_order_they_were_read_in() -> None:
    with pytest.raises(TypeError, match=r"Bridge 0\.3's order: path, tokenizer, image_processor"):
        bind_bridge_arguments(("/d", "tok", "proc", 64), {"seq_length": 32})
    with pytest.raises(TypeError, match="current Bridge's order"):
        bind_bridge_arguments(("/d",), {})


def test_signatures_differ_only_by_the_two_removed_parameters() -> None:
    removed = {"image_processor", "global_batch_size"}
    assert [p for p in LEGACY.parameters if p not in removed] == [
        p for p in CURRENT.parameters if p not in removed
    ]
    kinds = {name: p.kind for name, p in CURRENT.parameters.items()}
    assert kinds["image_processor"] is kinds["global_batch_size"] is inspect.Parameter.KEYWORD_ONLY
    assert list(LEGACY.parameters)[:7] == [
        "path",
        "tokenizer",
        "image_processor",
        "seq_length",
        "micro_batch_size",
        "global_batch_size",
        "num_workers",
    ]
    assert LEGACY.parameters["image_processor"].default is inspect.Parameter.empty
    assert list(LEGACY.parameters)[-2:] == ["pg_collection", "kwargs"]
