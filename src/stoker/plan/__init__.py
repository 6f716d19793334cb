"""The planner: pure functions of integers deciding which sample every stream reads, and when.

No I/O, no torch, no per-sample Python objects: everything is numpy over integers, so 10^9
samples plan in seconds. See :mod:`stoker.plan.stream` for the order of one stream and
:mod:`stoker.plan.topology` for how streams map onto ranks and dataloader workers.
"""

from __future__ import annotations

from stoker.plan.blend import (
    advance,
    epochized_allotments,
    epochized_choices,
    weighted_choices,
)
from stoker.plan.rng import BLEND, SLICE_ORDER, WINDOW, keyed_rng
from stoker.plan.slices import global_to_shard
from stoker.plan.stream import RefBlock, StreamPlan
from stoker.plan.topology import Topology, default_virtual_workers

__all__ = [
    "BLEND",
    "SLICE_ORDER",
    "WINDOW",
    "RefBlock",
    "StreamPlan",
    "Topology",
    "advance",
    "default_virtual_workers",
    "epochized_allotments",
    "epochized_choices",
    "global_to_shard",
    "keyed_rng",
    "weighted_choices",
]
