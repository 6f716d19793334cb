"""Packing counters of this process, read by the worker meter and summed in ``loader.stats()``.

Counted when ``select_samples_to_pack`` selects: ``packs``, ``packed_samples`` (members of those
packs), ``partial_samples`` (of those, the parts of split samples: ``PartialSample``),
``pushed_back`` (samples a ``PackedSamplesOutput`` kept in the buffer). Where the task
encoder gives sizes, through the optional hook ``packing_sample_size(sample) -> int`` and the
attribute ``packing_capacity`` (the size of one pack, e.g. the sequence length), also ``size``
(summed over packed members) and ``capacity`` (``packing_capacity`` per pack), so the fill ratio
is ``size / capacity`` and the padding share ``1 - size / capacity``. Neither is an Energon
name (its pull requests have no size hook).
With named packing groups (:mod:`stoker.pipeline.pack_groups`) each counter is also kept per
group, as ``group/NAME/counter``, and the summary gives each group's figures under that prefix.

Example:
    >>> before = dict(PACKING)
    >>> count_selection(None, [[3, 4], [5]], pushed_back=2)
    >>> {k: PACKING[k] - before[k] for k in ("packs", "packed_samples", "pushed_back")}
    {'packs': 2, 'packed_samples': 3, 'pushed_back': 2}
    >>> summary({"packs": 2, "packed_samples": 5, "size": 15, "capacity": 20})["padding_share"]
    0.25
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.pipeline.pack_partial import PartialSample

#: Process-wide counters (never reset: readers take differences).
PACKING: dict[str, int] = {
    "packs": 0,
    "packed_samples": 0,
    "partial_samples": 0,
    "pushed_back": 0,
    "size": 0,
    "capacity": 0,
}


def count_selection(
    encoder: Any, groups: Sequence[Sequence[Any]], pushed_back: int, group: str | None = None
) -> None:
    """Count one selection: its (non-empty) groups of samples and how many it pushed back;
    ``group``: the packing group's name, counted also under ``group/NAME/``."""
    groups = [g for g in groups if g]
    counts = {
        "packs": len(groups),
        "packed_samples": sum(len(g) for g in groups),
        "partial_samples": sum(isinstance(s, PartialSample) for g in groups for s in g),
        "pushed_back": pushed_back,
    }
    size = getattr(encoder, "packing_sample_size", None)
    capacity = getattr(encoder, "packing_capacity", None)
    if size is not None and capacity is not None and groups:
        counts["size"] = sum(int(size(s)) for g in groups for s in g)
        counts["capacity"] = int(capacity) * len(groups)
    for name, n in counts.items():
        PACKING[name] += n
        if group is not None:
            key = f"group/{group}/{name}"
            PACKING[key] = PACKING.get(key, 0) + n


def summary(counts: dict[str, int]) -> dict[str, float]:
    """What ``loader.stats().packing`` shows for summed ``counts`` (empty before any pack),
    then each packing group's figures as ``group/NAME/figure``.

    Example:
        >>> summary({"packs": 2, "packed_samples": 6, "group/a/packs": 2,
        ...          "group/a/packed_samples": 6})
        {'packs': 2, 'samples_per_pack': 3.0, 'pushed_back': 0, 'group/a/packs': 2, \
'group/a/samples_per_pack': 3.0, 'group/a/pushed_back': 0}
    """
    out = _figures(counts)
    groups = sorted({k.rsplit("/", 1)[0] for k in counts if k.startswith("group/")})
    for prefix in groups:
        mine = {k[len(prefix) + 1 :]: v for k, v in counts.items() if k.startswith(prefix + "/")}
        out.update({f"{prefix}/{k}": v for k, v in _figures(mine).items()})
    return out


def _figures(counts: dict[str, int]) -> dict[str, float]:
    packs = counts.get("packs", 0)
    if not packs and not counts.get("pushed_back", 0):
        return {}
    out: dict[str, float] = {
        "packs": packs,
        "samples_per_pack": counts.get("packed_samples", 0) / packs if packs else 0.0,
        "pushed_back": counts.get("pushed_back", 0),
    }
    if counts.get("partial_samples", 0):
        out["partial_samples"] = counts["partial_samples"]
    if counts.get("capacity", 0):
        out["fill_ratio"] = counts["size"] / counts["capacity"]
        out["padding_share"] = 1.0 - out["fill_ratio"]
    return out
