"""The planned share of each dataset of a metadataset over training, from the weights alone.

Nothing is read but the YAML: the share of a dataset at global batch ``j`` is its weight there,
normalised at each blend level (:class:`~stoker.plan.weights.BlendWeights`), so the mix of a whole
run is known before it starts. ``stoker mix`` prints it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from stoker.errors import ConfigError
from stoker.metadataset.flatten import flatten
from stoker.metadataset.parse import load_metadataset
from stoker.plan.weights import BlendWeights, Float64Array


@dataclass(frozen=True)
class PlannedMix:
    """Per dataset, its mean planned share in each window of global batches."""

    datasets: list[str]
    #: First global batch of each window (the last window ends at ``steps``).
    starts: list[int]
    steps: int
    #: ``(datasets, windows)``: mean share in each window.
    shares: Float64Array
    #: Global batches below ``steps`` where a schedule has a point (the mix changes course).
    knots: list[int]


def planned_mix(path: str, steps: int, windows: int = 10, split: str = "train") -> PlannedMix:
    """The planned mix of ``path``'s ``split`` over ``steps`` global batches, in ``windows``.

    Example:
        >>> mix = planned_mix("mix.yaml", 10**6)  # weights 0.7 and 0.3
        >>> mix.shares[:, 0]
        array([0.7, 0.3])
    """
    if steps < 1 or windows < 1:
        raise ConfigError(f"{steps=} and {windows=} must be >= 1.")
    plan = flatten(load_metadataset(path), split)
    if plan.kind == "epochized":
        raise ConfigError(
            f"{path}: split {split!r} is an epochized blend: its mix follows repetitions, not "
            "the batch index.",
            hint="stoker mix shows weighted blends (blend: with weight: ...).",
        )
    # Constant weights: one level of the leaves' flattened weights (nested blends multiplied).
    flat = tuple(leaf.weight or 1.0 for leaf in plan.leaves)
    tree = plan.schedule() or BlendWeights(tuple(((flat, i),) for i in range(len(flat))))
    edges = np.linspace(0, steps, min(windows, steps) + 1).astype(np.int64)
    sums = share_sums(tree, edges.tolist())
    shares = (sums[:, 1:] - sums[:, :-1]) / np.diff(edges)
    return PlannedMix(
        datasets=[leaf.path for leaf in plan.leaves],
        starts=edges[:-1].tolist(),
        steps=steps,
        shares=shares,
        knots=[k for k in tree.knots() if 0 < k < steps],
    )


def share_sums(tree: BlendWeights, at: list[int]) -> Float64Array:
    """``(D, len(at))``: each dataset's share summed over the global batches ``[0, x)`` for each
    ``x`` of ``at`` (ascending). Between two points where a schedule changes course, outside
    linear ramps, the share is constant: one evaluation times the length stands for the sum, so
    the cost grows with the ramps' lengths and the windows, not with the steps."""
    ramps = tree.ramps()
    cuts = sorted({0, *at, *(k for k in tree.knots() if 0 < k < at[-1])})
    acc = np.zeros(len(tree.paths))
    sums = {0: acc.copy()}
    for lo, hi in itertools.pairwise(cuts):
        if any(a < hi and lo < z for a, z in ramps):
            acc += tree.at(np.arange(lo, hi, dtype=np.int64)).sum(axis=1)
        else:
            acc += tree.at([lo])[:, 0] * (hi - lo)
        sums[hi] = acc.copy()
    out: Float64Array = np.stack([sums[x] for x in at], axis=1)
    return out
