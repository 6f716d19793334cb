"""Flatten one split of a metadataset into weighted leaves: what the loader blends.

Follows Energon's ``get_datasets``: weights are normalised per blend level and multiplied down
the tree (a weight may be a schedule, at any level: :mod:`stoker.plan.weights`), repetitions
multiply, subflavors of outer levels win, subsets compose (inner first, outer within it),
``shuffle_over_epochs_multiplier`` multiplies (``None`` wins, then ``-1``), and a reference's
``split_part`` is inherited by everything below it; ``group`` names join outer first with ``+``
(Energon's packing groups: ``alpha`` in a blend of group ``mix`` is ``mix+alpha``). A weighted
blend and an epochized blend cannot be mixed; Energon refuses that too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from stoker.metadataset.nodes import AuxRef, BlendNode, DatasetRef, JoinNode, Metadataset, Node
from stoker.metadataset.subset import SubsetRange
from stoker.metadataset.where import Where
from stoker.plan.weights import BlendWeights, Level, weights_at

PlanKind = Literal["single", "weighted", "epochized", "concat"]


@dataclass(frozen=True)
class Leaf:
    """One dataset split to read, with everything the tree above it implies.

    ``weight`` is set in a weighted plan (they sum to 1; with schedules, the weights at batch
    0), ``repetitions`` in an epochized one. ``weight_path`` lists, from the top blend down, the
    weights of each level's entries and the entry this leaf is under (what a schedule needs,
    :class:`~stoker.plan.weights.BlendWeights`). A join is one leaf: ``join`` holds it and
    ``path`` is its first dataset.
    """

    path: str
    split_part: str
    weight: float | None = None
    repetitions: float | None = None
    subflavors: dict[str, Any] = field(default_factory=dict)
    subset: SubsetRange | None = None
    shuffle_over_epochs_multiplier: int | None = 1
    dataset_config: str | None = None
    split_config: str | None = None
    aux: dict[str, AuxRef] = field(default_factory=dict)
    join: JoinNode | None = None
    weight_path: tuple[Level, ...] = ()
    #: The packing group (:mod:`stoker.pipeline.pack_groups`); None: the default group.
    group: str | None = None


@dataclass(frozen=True)
class BlendPlan:
    """How to combine the leaves: one dataset, by weight, by repetitions, or one after another."""

    kind: PlanKind
    leaves: list[Leaf]

    def schedule(self) -> BlendWeights | None:
        """The leaves' weights as functions of the batch index, if any weight is a schedule."""
        weights = BlendWeights(tuple(leaf.weight_path for leaf in self.leaves))
        return weights if self.kind == "weighted" and weights.scheduled else None


@dataclass(frozen=True)
class _Inherited:
    """What a node receives from the levels above it."""

    split_part: str
    subflavors: dict[str, Any]
    subset: SubsetRange | None = None
    shuffle: int | None = 1
    group: str | None = None

    def enter(self, node: DatasetRef | JoinNode) -> _Inherited:
        return _Inherited(
            node.split_part or self.split_part,
            {**node.subflavors, **self.subflavors},  # outer levels win
            node.subset.compose(self.subset) if node.subset else self.subset,
            _shuffle(self.shuffle, node.shuffle_over_epochs_multiplier),
            _group(self.group, node.group),
        )


def flatten(metadataset: Metadataset, split: str, *, training: bool = True) -> BlendPlan:
    """The leaves of ``split``; with ``training=False`` a ``concat`` plan, as Energon's val/test.

    Example:
        >>> import os
        >>> from stoker.metadataset.parse import load_metadataset
        >>> plan = flatten(load_metadataset("mix.yaml"), "train")
        >>> [(os.path.basename(leaf.path), leaf.weight) for leaf in plan.leaves]
        [('coco-wds', 0.7), ('coyo-wds', 0.3)]
    """
    node = _split_node(metadataset, split, Where(metadataset.path, "splits"))
    kind, leaves = _walk(node, _Inherited(split, {}))
    if not training:
        return BlendPlan("concat", [replace(x, weight=None, repetitions=None) for x in leaves])
    return BlendPlan(kind, leaves)


def _split_node(metadataset: Metadataset, split: str, where: Where) -> Node:
    if split not in metadataset.splits:
        where.fail(
            f"no split {split!r} in {metadataset.path}.",
            hint=f"Valid splits: {', '.join(sorted(metadataset.splits))}.",
        )
    return metadataset.splits[split]


def _walk(node: Node, above: _Inherited) -> tuple[PlanKind, list[Leaf]]:
    if isinstance(node, BlendNode):
        return _walk_blend(node, above)
    inner = above.enter(node)
    if isinstance(node, JoinNode):
        return "single", [_leaf(node.parts[0].ref, inner, join=node)]
    if node.nested is not None:
        at = node.where.key("path") if node.where.file else Where(node.path)
        return _walk(_split_node(node.nested, inner.split_part, at), inner)
    return "single", [_leaf(node, inner)]


def _leaf(ref: DatasetRef, inner: _Inherited, join: JoinNode | None = None) -> Leaf:
    return Leaf(
        path=ref.path,
        split_part=inner.split_part,
        subflavors=inner.subflavors,
        subset=inner.subset,
        shuffle_over_epochs_multiplier=inner.shuffle,
        dataset_config=None if join else ref.dataset_config,
        split_config=None if join else ref.split_config,
        aux={} if join else ref.aux,
        join=join,
        group=inner.group,
    )


def _walk_blend(node: BlendNode, above: _Inherited) -> tuple[PlanKind, list[Leaf]]:
    subset = node.subset.compose(above.subset) if node.subset else above.subset
    inner = replace(above, subset=subset, group=_group(above.group, node.group))
    siblings = tuple(item.factor for item in node.items)
    at_start = weights_at(siblings, [0])[:, 0].tolist()  # the weights at batch 0
    total = sum(at_start)
    out: list[Leaf] = []
    for i, item in enumerate(node.items):
        kind, leaves = _walk(item.node, inner)
        if kind not in ("single", node.kind):
            item.node.where.fail(
                f"a {kind} blend inside a {node.kind} blend is not supported "
                "(Energon refuses it too).",
                hint="Use blend (weights) or blend_epochized (repetitions) at every level.",
            )
        for leaf in leaves:
            if node.kind == "weighted":
                weight = 1.0 if leaf.weight is None else leaf.weight
                share = at_start[i] / total if total > 0 else 0.0
                level = (siblings, i)
                out.append(
                    replace(leaf, weight=weight * share, weight_path=(level, *leaf.weight_path))
                )
            else:
                reps = 1.0 if leaf.repetitions is None else leaf.repetitions
                out.append(replace(leaf, repetitions=reps * at_start[i]))
    return node.kind, out


def _shuffle(outer: int | None, inner: int | None) -> int | None:
    if outer is None or inner is None:
        return None  # no shuffling over epochs overrides everything
    if outer == -1 or inner == -1:
        return -1
    return outer * inner


def _group(outer: str | None, inner: str | None) -> str | None:
    """A node's packing group: its own after the outer one (``outer+inner``), as Energon."""
    if inner is None:
        return outer
    return inner if outer is None else f"{outer}+{inner}"
