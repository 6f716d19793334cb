"""The save/restore contract, reusable for every kind of loader.

A loader restored from a state saved after ``m`` batches must yield exactly the batches the
uninterrupted loader yields after its ``m``-th, for many ``m``, through the end of the epoch and
into the next one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from stoker.runtime.loader import Loader


def write_text_dataset(root: Any) -> str:
    """6 shards x 7 text samples (42) under ``root``, prepared as TextSample; its path."""
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset
    from tests.conftest import write_shard

    for s in range(6):
        samples = [(f"s{s}_{i:02d}", {"txt": f"text {s}.{i}".encode()}) for i in range(7)]
        write_shard(root / f"shard_{s}.tar", samples)
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return str(root)


def fingerprint(value: Any) -> Any:
    """A comparable digest of a batch: keys, strings and numbers as is, tensors by content."""
    if isinstance(value, torch.Tensor):
        data = value.detach().contiguous().numpy().tobytes()
        return ("tensor", tuple(value.shape), str(value.dtype), hashlib.blake2b(data).hexdigest())
    if isinstance(value, np.ndarray):  # e.g. the tokens of a .bin/.idx sample
        data = np.ascontiguousarray(value).tobytes()
        return ("array", value.shape, str(value.dtype), hashlib.blake2b(data).hexdigest())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(
            (f.name, fingerprint(getattr(value, f.name)))
            for f in dataclasses.fields(value)
            if f.name != "__sources__"
        )
    if isinstance(value, dict):
        return tuple(sorted((k, fingerprint(v)) for k, v in value.items() if k != "__sources__"))
    if isinstance(value, list | tuple):
        return tuple(fingerprint(v) for v in value)
    return value


def rank_free(digest: Any) -> Any:
    """A :func:`fingerprint` without the batch index in batches' restore keys and the sample index
    in samples' keys: they count the rank's batches and samples (Energon's
    ``current_batch_index`` / ``current_sample_index``), so they differ between topologies."""
    if isinstance(digest, tuple):
        if len(digest) == 2 and digest[0] == "__restore_key__":
            key = digest[1]
            if isinstance(key, tuple) and len(key) >= 2 and key[0] == "BatchDataset":
                return ("__restore_key__", (key[0], *(_sample_key_free(k) for k in key[2:])))
            return ("__restore_key__", _sample_key_free(key))
        return tuple(rank_free(item) for item in digest)
    if isinstance(digest, list):
        return [rank_free(item) for item in digest]
    return digest


def _sample_key_free(key: Any) -> Any:
    """An encoded sample's key without the hooks' sample index (it counts the rank's samples)."""
    if isinstance(key, tuple) and len(key) == 5 and key[0] == "Webdataset":
        return (*key[:3], key[4])
    return key


def take(loader: Iterable[Any], n: int) -> list[Any]:
    """The fingerprints of the next ``n`` batches, continuing over passes (``for`` loops).

    A pass may be empty (a loader restored exactly at the end of an epoch); two empty passes in a
    row mean the loader is done.
    """
    out: list[Any] = []
    empty = 0
    while len(out) < n and empty < 2:
        before = len(out)
        out.extend(fingerprint(b) for b in itertools.islice(loader, n - len(out)))
        empty = empty + 1 if len(out) == before else 0
    return out


def roundtrip(state: Any) -> Any:
    """States are plain data: they survive JSON."""
    return json.loads(json.dumps(state))


def run_contract(make_loader: Callable[[], Loader], total: int, midpoints: Iterable[int]) -> None:
    """Assert the contract for each midpoint (see the module docstring)."""
    with make_loader() as loader:
        reference = take(loader, total)
    assert len(reference) == total, "the reference run ended early"
    for m in midpoints:
        with make_loader() as loader:
            head = take(loader, m)
            state = roundtrip(loader.save_state_rank())
        with make_loader() as restored:
            restored.restore_state_rank(state)
            tail = take(restored, total - m)
        assert head + tail == reference, f"restore after {m} batches diverged"
