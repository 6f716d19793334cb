"""Packing counters of this process, read by the worker meter and summed in ``loader.stats()``.

Counted when ``select_samples_to_pack`` selects: ``packs``, ``packed_samples`` (members of those
packs), ``pushed_back`` (samples a ``PackedSamplesOutput`` kept in the buffer). Where the task
encoder gives sizes, through the optional hook ``packing_sample_size(sample) -> int`` and the
attribute ``packing_capacity`` (the size of one pack, e.g. the sequence length), also ``size``
(summed over packed members) and ``capacity`` (``packing_capacity`` per pack), so the fill ratio
is ``size / capacity``. Neither is an Energon name (its pull requests have no size hook).

Example:
    >>> before = dict(PACKING)
    >>> count_selection(None, [[3, 4], [5]], pushed_back=2)
    >>> {k: PACKING[k] - before[k] for k in ("packs", "packed_samples", "pushed_back")}
    {'packs': 2, 'packed_samples': 3, 'pushed_back': 2}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Process-wide counters (never reset: readers take differences).
PACKING: dict[str, int] = {
    "packs": 0,
    "packed_samples": 0,
    "pushed_back": 0,
    "size": 0,
    "capacity": 0,
}


def count_selection(encoder: Any, groups: Sequence[Sequence[Any]], pushed_back: int) -> None:
    """Count one selection: its (non-empty) groups of samples and how many it pushed back."""
    groups = [g for g in groups if g]
    PACKING["packs"] += len(groups)
    PACKING["packed_samples"] += sum(len(g) for g in groups)
    PACKING["pushed_back"] += pushed_back
    size = getattr(encoder, "packing_sample_size", None)
    capacity = getattr(encoder, "packing_capacity", None)
    if size is None or capacity is None or not groups:
        return
    PACKING["size"] += sum(int(size(s)) for g in groups for s in g)
    PACKING["capacity"] += int(capacity) * len(groups)


def summary(counts: dict[str, int]) -> dict[str, float]:
    """What ``loader.stats().packing`` shows for summed ``counts`` (empty before any pack)."""
    packs = counts.get("packs", 0)
    if not packs and not counts.get("pushed_back", 0):
        return {}
    out: dict[str, float] = {
        "packs": packs,
        "samples_per_pack": counts.get("packed_samples", 0) / packs if packs else 0.0,
        "pushed_back": counts.get("pushed_back", 0),
    }
    if counts.get("capacity", 0):
        out["fill_ratio"] = counts["size"] / counts["capacity"]
    return out
