"""Loader state: plain data, versioned, fingerprinted, and redistributable over topologies.

A rank's state is the position of each stream (virtual worker) it owns plus a few counters::

    {"stoker_state_version": 2, "fingerprint": {...}, "topology": {...},
     "epoch": 0, "t": 120, "yielded": 118, "finished": False,
     "exhausted": [5], "streams": {"1": [0, 480, 0], "3": [0, 470, 1]}}

With packing or grouping, ``"buffers"`` holds, per stream whose stages hold samples, the
references of those samples (``{"3": {"pack": {...}, "group": {...}}}``, see
``stoker.pipeline.pack`` and ``stoker.pipeline.group``): a restore re-reads only them. It grows
with the packing buffer (a few bytes per buffered sample); it is absent from older states.

Versions: 2 adds the recipe hash to the fingerprint (:mod:`stoker.runtime.fingerprint`) and
encodes the packing buffer as one string. This stoker reads 1 and 2; a version 1 state is checked
on the fingerprint fields it has (logged), and its packing buffers are read in their flat layout.

It holds only str/int/bool/list/dict, so ``json`` and ``torch.load(weights_only=True)`` load it.
Because streams, not ranks, carry positions, the states of all ranks can be merged and cut again
for another world size or worker count (:func:`redistribute`).
"""

from __future__ import annotations

import logging
from typing import Any

from stoker.errors import ConfigError
from stoker.plan import Topology
from stoker.runtime.fingerprint import RECIPE, has_recipe
from stoker.runtime.state_schema import validate_state

STATE_VERSION = 2
#: The versions this stoker restores (see the module docstring).
READS_VERSIONS = (1, 2)
_LOG = logging.getLogger(__name__)
_VERSION_KEY = "stoker_state_version"


def check_state(state: Any) -> dict[str, Any]:
    """Raise a clear error unless ``state`` is a stoker loader state of a known version."""
    if not isinstance(state, dict) or _VERSION_KEY not in state:
        raise ConfigError(
            "this is not a stoker loader state.",
            hint="Pass what save_state_rank() (or one entry of save_state_global()) returned.",
        )
    version = state[_VERSION_KEY]
    if type(version) is not int or version not in READS_VERSIONS:
        raise ConfigError(
            f"loader state version {version!r} ({type(version).__name__}) is not supported "
            f"(this stoker reads versions {', '.join(map(str, READS_VERSIONS))}, an int).",
            hint="Restore with the stoker version that saved it.",
        )
    validate_state(state)
    return state


def fingerprint_diff(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per differing field: ``name: saved X, current Y``."""
    names = sorted(set(saved) | set(current))
    return [
        f"{name}: saved {saved.get(name)!r}, current {current.get(name)!r}"
        for name in names
        if saved.get(name) != current.get(name)
    ]


def _informative(name: str) -> bool:
    """Fields a restore reports but does not refuse: the task encoder's class (Energon restores
    under a changed task encoder; positions count references, which it does not change)."""
    return name == "task_encoder" or name.endswith(".task_encoder")


def check_fingerprint(state: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse a restore under another recipe, listing each differing field (saved vs current);
    a changed task encoder class is only logged (see :func:`_informative`).

    A fingerprint from before the recipe hash (state version 1) is checked on the fields it has,
    with a logged note: what it lacks (per-source multipliers, subsets, ``repeat``...) cannot be.
    """
    saved = state["fingerprint"]
    if not has_recipe(saved) and has_recipe(current):
        _LOG.info(
            "restoring a loader state saved before stoker fingerprinted the whole recipe: only "
            "%s are checked; %s are not.",
            ", ".join(sorted(saved)),
            ", ".join(sorted(set(current) - set(saved))),
        )
        current = {k: v for k, v in current.items() if k in saved}
    changed = [n for n in sorted(set(saved) | set(current)) if _informative(n)]
    for name in changed:
        if saved.get(name) != current.get(name):
            _LOG.warning(
                "restoring a state saved with %s=%r under %r: it continues from the same samples.",
                name, saved.get(name), current.get(name),
            )  # fmt: skip
    listed = [k for k in sorted(set(saved) | set(current)) if not _informative(k)]
    diff = fingerprint_diff(
        {k: saved[k] for k in listed if k in saved and not _is_hash(k)},
        {k: current[k] for k in listed if k in current and not _is_hash(k)},
    )
    hashes = [k for k in listed if _is_hash(k) and saved.get(k) != current.get(k)]
    if hashes and not diff:
        diff = [
            f"{k}: saved {saved.get(k)!r}, current {current.get(k)!r} (a detail not listed "
            "differs: the shard list, per-shard sample counts or the excluded samples)"
            for k in hashes
        ]
    if diff:
        raise ConfigError(
            "the loader state was saved with another configuration:\n  " + "\n  ".join(diff),
            hint="Restore with the same dataset and loader arguments as when it was saved.",
        )


def _is_hash(name: str) -> bool:
    return name == RECIPE or name.endswith("." + RECIPE)


def rebatch(state: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """``state`` for a loader with another batch size (Energon resumes under a new micro-batch
    size too): stream positions count references, so they stay; the batch counters are rescaled.

    Refused (clear error) where the batch size is part of the position: grouped batches, dataset
    wrappers (they may count batches), or a count of samples that the new size does not divide.
    Returns ``state`` itself when the batch size did not change.
    """
    saved_size, size = state["fingerprint"].get("batch_size"), current.get("batch_size")
    if saved_size == size or not isinstance(saved_size, int) or not isinstance(size, int):
        return state
    if current.get("wrappers") or current.get("group_batches"):
        raise ConfigError(
            f"the state was saved with batch_size={saved_size}, the loader has {size}; with "
            "dataset wrappers or grouped batches the batch size is part of the position.",
            hint=f"Restore with batch_size={saved_size}.",
        )
    if any(k == "blend_schedule" or k.endswith(".blend_schedule") for k in current):
        raise ConfigError(
            f"the state was saved with batch_size={saved_size}, the loader has {size}; a blend "
            "with weight schedules follows the batch index, which counts batches of the saved "
            "size (another size would move the schedule).",
            hint=f"Restore with batch_size={saved_size}.",
        )
    counted = "consumed" if "consumed" in state else "t"
    samples = state[counted] * saved_size
    if samples % size:
        raise ConfigError(
            f"the state is {samples} samples in (batch_size={saved_size}), which is not a whole "
            f"number of batches of {size}.",
            hint=f"Restore with a batch size that divides {samples}, or with {saved_size}.",
        )
    scale = {k: state[k] * saved_size // size for k in ("t", "yielded", counted)}
    return {**state, **scale, "fingerprint": {**state["fingerprint"], "batch_size": size}}


def merge(states: list[dict[str, Any]]) -> dict[str, Any]:
    """One state holding every stream of every rank (from ``save_state_global``)."""
    states = [check_state(s) for s in states]
    if not states:
        raise ConfigError("no loader states to restore from.")
    first = states[0]
    streams: dict[str, list[int]] = {}
    buffers: dict[str, Any] = {}
    passed: dict[str, Any] = {}
    origins: dict[str, Any] = {}
    exhausted: set[int] = set()
    for state in states:
        for key in ("fingerprint", "epoch", "t"):
            if state[key] != first[key]:
                raise ConfigError(
                    f"the ranks' states disagree on {key!r}.",
                    hint="Pass the states of one save_state_global() call.",
                )
        streams.update(state["streams"])
        buffers.update(state.get("buffers", {}))
        passed.update(state.get("passed", {}))
        origins.update(state.get("origins", {}))
        exhausted.update(state["exhausted"])
    world = first["topology"]["world_size"]
    ranks = sorted(s["topology"]["rank"] for s in states)
    if ranks != list(range(world)):
        raise ConfigError(
            f"expected the states of ranks 0..{world - 1}, got ranks {ranks}.",
            hint="Pass every rank's state (save_state_global gathers them).",
        )
    consumed = first["t"] * world  # micro-batches of all ranks together
    return {
        **first,
        "topology": {**first["topology"], "rank": None, "world_size": None, "num_workers": None},
        "consumed": consumed,
        "streams": streams,
        "buffers": buffers,
        "passed": passed,
        **({"origins": origins} if origins else {}),
        "exhausted": sorted(exhausted),
    }


def merge_one(state: dict[str, Any]) -> dict[str, Any]:
    """A single rank's state in merged form (for a restore on the same rank)."""
    state = check_state(state)
    world = state["topology"]["world_size"]
    return {**state, "consumed": state["t"] * world}


def for_rank(merged: dict[str, Any], topology: Topology) -> dict[str, Any]:
    """The share of a merged state that ``topology`` (one rank) continues from."""
    saved_v = merged["topology"]["virtual_workers"]
    if saved_v != topology.virtual_workers:
        raise ConfigError(
            f"the state was saved with virtual_workers={saved_v}, the loader has "
            f"{topology.virtual_workers}.",
            hint=f"Pass virtual_workers={saved_v} to get_train_dataset.",
        )
    consumed, world = merged["consumed"], topology.world_size
    if consumed % world:
        raise ConfigError(
            f"{consumed} micro-batches were consumed, which {world} ranks cannot split evenly.",
            hint="Resume at a global step boundary (keep world_size x accumulation constant).",
        )
    own = {str(s) for s in topology.rank_streams().tolist()}
    return {
        **merged,
        "topology": _topology_dict(topology),
        "t": consumed // world,
        "streams": {k: v for k, v in merged["streams"].items() if k in own},
        "buffers": {k: v for k, v in merged.get("buffers", {}).items() if k in own},
        "passed": {k: v for k, v in merged.get("passed", {}).items() if k in own},
        **_own_origins(merged, own),
        "exhausted": [s for s in merged["exhausted"] if str(s) in own],
    }


def redistribute(
    states: list[dict[str, Any]], world_size: int, num_workers: int
) -> list[dict[str, Any]]:
    """The states of all ranks re-cut for ``world_size`` ranks with ``num_workers`` workers each."""
    merged = merge(states)
    v = merged["topology"]["virtual_workers"]
    return [
        for_rank(merged, Topology(v, world_size, rank, num_workers)) for rank in range(world_size)
    ]


def _own_origins(merged: dict[str, Any], own: set[str]) -> dict[str, Any]:
    """``{"origins": ...}`` of the streams ``own`` (empty without a changed mix)."""
    origins = {k: v for k, v in merged.get("origins", {}).items() if k in own}
    return {"origins": origins} if "origins" in merged else {}


def _topology_dict(topology: Topology) -> dict[str, int]:
    return {
        "virtual_workers": topology.virtual_workers,
        "world_size": topology.world_size,
        "rank": topology.rank,
        "num_workers": topology.num_workers,
    }


def make_state(
    *,
    fingerprint: dict[str, Any],
    topology: Topology,
    epoch: int,
    t: int,
    yielded: int,
    finished: bool,
    exhausted: list[int],
    streams: dict[int, list[int]],
    buffers: dict[int, Any] | None = None,
    passed: dict[int, dict[str, int]] | None = None,
    datasets: list[dict[str, Any]] | None = None,
    origins: dict[int, tuple[int, ...]] | None = None,
) -> dict[str, Any]:
    held = {str(s): dict(c) for s, c in sorted((passed or {}).items()) if any(c.values())}
    return {
        _VERSION_KEY: STATE_VERSION,
        "fingerprint": fingerprint,
        "topology": _topology_dict(topology),
        "epoch": epoch,
        "t": t,
        "yielded": yielded,
        "finished": finished,
        "exhausted": sorted(exhausted),
        "streams": {str(s): list(p) for s, p in sorted(streams.items())},
        "buffers": {str(s): b for s, b in sorted((buffers or {}).items()) if b},
        **({"passed": held} if held else {}),
        **({"datasets": datasets} if datasets is not None else {}),
        **({"origins": {str(s): list(c) for s, c in sorted(origins.items())}} if origins else {}),
    }
