"""Fuzzing the readers of ``.nv-meta/.info.json`` and ``split.yaml``: every input ends, within
a time bound, in a result or a stoker error (never a raw exception, a hang or a huge allocation).

Inputs are random bytes, random JSON/YAML documents, and valid files with one value replaced.
The normal run tries a few hundred inputs per property; a longer one:
``STOKER_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest -q tests/property/test_meta_fuzz.py``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from stoker.errors import StokerError
from stoker.format.meta import read_info, read_split_config
from stoker.storage import open_store
from tests.property.test_tar_fuzz import SETTINGS, time_bound

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["shard_000.tar", "../x.tar", "/abs.tar", "a/{0..9}.tar", "s3://b/k.tar"])
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
VALID_INFO = {"shard_counts": {"shard_000.tar": 3, "shard_001.tar": 2}}
VALID_SPLIT = {"split_parts": {"train": ["shard_000.tar"], "val": ["shard_001.tar"]}, "exclude": []}


def _replace_one(document: dict[str, Any], value: Any, depth: int) -> dict[str, Any]:
    """``document`` with the value at some depth along its first keys replaced by ``value``."""
    out = json.loads(json.dumps(document))
    target = out
    for _ in range(depth):
        key = next(iter(target), None)
        if key is None or not isinstance(target[key], dict):
            break
        target = target[key]
    if target:
        target[next(iter(target))] = value
    return out


def _encodings(document: Any) -> st.SearchStrategy[bytes]:
    return st.sampled_from(
        [
            json.dumps(document, allow_nan=True).encode(),
            yaml.safe_dump(document).encode(),
        ]
    )


def _documents(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    replaced = st.builds(_replace_one, st.just(valid), DOCUMENTS, st.integers(0, 2))
    return st.binary(max_size=200) | DOCUMENTS.flatmap(_encodings) | replaced.flatmap(_encodings)


def _read(name: str, content: bytes) -> None:
    with tempfile.TemporaryDirectory() as root:
        meta = Path(root) / ".nv-meta"
        meta.mkdir()
        (meta / name).write_bytes(content)
        store = open_store(root)
        with time_bound():
            try:
                if name == ".info.json":
                    info = read_info(store)
                    assert all(n >= 0 for n in info.shard_counts.values())
                else:
                    split = read_split_config(store)
                    assert isinstance(split.split_parts, dict)
            except StokerError:
                pass


@SETTINGS
@given(_documents(VALID_INFO))
def test_info_json(content: bytes) -> None:
    _read(".info.json", content)


@SETTINGS
@given(_documents(VALID_SPLIT))
def test_split_yaml(content: bytes) -> None:
    _read("split.yaml", content)
