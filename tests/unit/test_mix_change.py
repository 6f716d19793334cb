"""Matching datasets across mixes by identity (path, split part, subset, subflavors), the one-line
summary of a changed mix, and the checks of a state's ``datasets`` / ``origins`` fields."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from stoker.errors import ConfigError
from stoker.format.dataset_config import DatasetConfig
from stoker.runtime import mix_change
from stoker.runtime.state_schema import validate_state
from stoker.sources.source import DataSource


def source(path: str, subset: tuple[int, int] | None = None, **subflavors: Any) -> DataSource:
    return DataSource(path, "train", ("0.jsonl",), np.array([10]), DatasetConfig(None, None),
                      subflavors=subflavors, subset=subset)  # fmt: skip


def test_identity_names_path_split_subset_and_subflavors() -> None:
    assert mix_change.identity(source("/d/a")) == {"path": "/d/a", "split": "train"}
    full = mix_change.identity(source("/d/a", (0, 5), lang="en"))
    assert full == {"path": "/d/a", "split": "train", "subset": [0, 5],
                    "subflavors": {"lang": "en"}}  # fmt: skip
    assert mix_change.name(full) == "/d/a [train, subset 0-5, subflavors {'lang': 'en'}]"


def test_match_by_identity_whatever_the_order_and_duplicates_in_order() -> None:
    before = (source("/d/a"), source("/d/b"), source("/d/a"), source("/d/a", lang="en"))
    saved = [mix_change.identity(s) for s in before]
    current = [mix_change.identity(s) for s in
               (source("/d/a", lang="en"), source("/d/a"), source("/d/c"), source("/d/a"),
                source("/d/a"), source("/d/a", (0, 5)))]  # fmt: skip
    # a with subflavors is saved 3; the two plain a's are saved 0 then 2, a third is new; c and
    # a's subset are new; b is gone.
    assert mix_change._match(saved, current) == [3, 0, None, 2, None, None]


def test_summary_lists_changed_weights_added_and_removed() -> None:
    change = mix_change.MixChange(
        kept=(("/d/a [train]", "share 0.5", "share 0.25"), ("/d/b [train]", "share 0.5",
              "share 0.5")),
        added=(("/d/c [train]", "share 0.25"),),
        removed=(("/d/x [train]", 120),),
    )  # fmt: skip
    line = change.summary()
    assert "\n" not in line and line.startswith("restored into a changed mix: kept 2 dataset(s)")
    assert "/d/a [train] share 0.5 -> share 0.25" in line and "/d/b" not in line
    assert "added (from the start) /d/c [train] share 0.25" in line
    assert "removed /d/x [train] (after 120 samples)" in line


STATE: dict[str, Any] = {
    "stoker_state_version": 2, "fingerprint": {}, "epoch": 0, "t": 1, "yielded": 1,
    "finished": False, "exhausted": [], "streams": {"0": [3, 1, 0]},
    "topology": {"virtual_workers": 2, "world_size": 1, "rank": 0, "num_workers": 0},
    "datasets": [{"path": "/d/a", "split": "train", "plan": [0, 0], "samples": 10,
                  "content": "ab"}, {"path": "/d/b", "split": "train", "plan": [1, 1],
                                     "samples": 10, "content": "cd"}],
    "origins": {"0": [3, 0]},
}  # fmt: skip


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        (("datasets",), {"a": 1}, "datasets"),
        (("datasets", 0, "plan"), [0], "datasets[0].plan"),
        (("datasets", 1, "samples"), -1, "datasets[1].samples"),
        (("datasets", 0, "path"), 3, "datasets[0].path"),
        (("origins", "0"), [1, "x"], "origins['0'][1]"),
        (("origins",), {"7": [1, 2]}, "origins['7']"),
    ],
)
def test_bad_mix_fields_are_named(where: tuple[Any, ...], value: Any, field: str) -> None:
    validate_state(copy.deepcopy(STATE))  # the good one passes
    state = copy.deepcopy(STATE)
    target: Any = state
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(ConfigError) as info:
        validate_state(state)
    assert field in info.value.problem
