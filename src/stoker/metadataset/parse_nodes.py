"""YAML mappings -> nodes: dataset references, blends and joins, each checked key by key."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from stoker.errors import ConfigError
from stoker.metadataset import where as check
from stoker.metadataset.nodes import (
    BlendItem,
    BlendKind,
    BlendNode,
    DatasetRef,
    JoinNode,
    JoinPart,
    Metadataset,
    Node,
    Nonmatch,
)
from stoker.metadataset.parse_extras import parse_aux, parse_object
from stoker.metadataset.paths import is_yaml, resolve_path
from stoker.metadataset.subset import SubsetRange, parse_range
from stoker.metadataset.where import Where
from stoker.plan.weights import Weight, parse_weight

COMMON_KEYS = frozenset(
    {"split_part", "subflavors", "subset", "shuffle_over_epochs_multiplier", "group"}
)
REF_KEYS = COMMON_KEYS | {"path", "dataset_config", "split_config", "aux"}
JOIN_KEYS = COMMON_KEYS | {"join", "joiner", "nonmatch"}
NODE_KINDS = ("path", "blend", "blend_epochized", "join")
NONMATCH = ("error", "skip", "none")


@dataclass(frozen=True)
class Context:
    """The folder that relative paths start from, and how to load a nested metadataset."""

    base: str
    load_nested: Callable[[str, Where], Metadataset]


def parse_node(
    raw: object, where: Where, ctx: Context, extra: frozenset[str] = frozenset()
) -> Node:
    """One node; ``extra`` are keys the caller reads itself (``weight`` in a blend)."""
    node = check.mapping(raw, where, "a dataset node")
    kinds = [k for k in NODE_KINDS if k in node]
    if len(kinds) != 1:
        found = f"both {kinds[0]!r} and {kinds[1]!r}" if kinds else "none of them"
        where.fail(
            f"a node needs exactly one of {', '.join(NODE_KINDS)}, found {found}.",
            hint="Split it into separate blend entries, or nest it in another metadataset file.",
        )
    if kinds[0] == "path":
        return parse_ref(node, where, ctx, extra)
    if kinds[0] == "join":
        return _parse_join(node, where, ctx, extra)
    return _parse_blend(node, where, ctx, extra, kinds[0])


def parse_ref(raw: dict[str, Any], where: Where, ctx: Context, extra: frozenset[str]) -> DatasetRef:
    """``{path: ...}``; a path to a ``.yaml`` file is loaded as a nested metadataset."""
    check.check_keys(raw, REF_KEYS | extra, where, "a dataset reference")
    path = resolve_path(ctx.base, check.string(raw["path"], where.key("path")))
    subset = _parse_subset(raw, where)
    nested = ctx.load_nested(path, where.key("path")) if is_yaml(path) else None
    if nested is not None:
        for key in ("dataset_config", "split_config", "aux"):
            if raw.get(key) is not None:
                where.key(key).fail(f"{key!r} is not allowed on a nested metadataset reference.")
        _relative_only(subset, where, "a nested metadataset reference")
    return DatasetRef(
        path=path,
        split_part=check.optional_string(raw, "split_part", where),
        subflavors=check.subflavors(raw, where),
        subset=subset,
        shuffle_over_epochs_multiplier=check.shuffle_multiplier(raw, where),
        dataset_config=check.optional_string(raw, "dataset_config", where),
        split_config=check.optional_string(raw, "split_config", where),
        aux=parse_aux(raw.get("aux"), where.key("aux"), ctx.base),
        nested=nested,
        where=where,
        group=check.optional_string(raw, "group", where),
    )


def _parse_blend(
    raw: dict[str, Any], where: Where, ctx: Context, extra: frozenset[str], key: str
) -> BlendNode:
    check.check_keys(raw, extra | {key, "subset", "group"}, where, f"a {key} node")
    entries = raw[key]
    if not isinstance(entries, list) or not entries:
        where.key(key).fail(f"expected a non-empty list of datasets, got {entries!r}.")
    factor_key = "weight" if key == "blend" else "repetitions"
    items = []
    for i, entry in enumerate(entries):
        at = where.key(key).index(i)
        mapping = check.mapping(entry, at, "a blend entry")
        factor = _factor(mapping.get(factor_key, 1), at.key(factor_key), key)
        items.append(BlendItem(parse_node(mapping, at, ctx, frozenset({factor_key})), factor))
    if (
        all(isinstance(item.factor, float) for item in items)
        and sum(item.factor for item in items if isinstance(item.factor, float)) <= 0
    ):
        where.key(key).fail(f"every {factor_key} is 0, so the blend is empty.")
    subset = _parse_subset(raw, where)
    _relative_only(subset, where, f"a {key} node")
    kind: BlendKind = "weighted" if key == "blend" else "epochized"
    return BlendNode(kind, tuple(items), subset, where, check.optional_string(raw, "group", where))


def _factor(value: object, where: Where, key: str) -> Weight:
    """A blend entry's weight (a number or a schedule) or repetitions (a number)."""
    if isinstance(value, dict) and key == "blend":
        try:
            return parse_weight(value)
        except ConfigError as e:
            where.fail(e.problem, hint=e.hint)
    if isinstance(value, dict):
        where.fail(
            "repetitions cannot be scheduled: an epochized blend follows passes over the data, "
            "not the batch index.",
            hint="Use blend with weight: {step: ...} or {linear: ...} to change the mix over "
            "training, or a number of repetitions here.",
        )
    return check.non_negative(value, where)


def _parse_join(raw: dict[str, Any], where: Where, ctx: Context, extra: frozenset[str]) -> JoinNode:
    check.check_keys(raw, JOIN_KEYS | extra, where, "a join node")
    default = _nonmatch(raw.get("nonmatch", "error"), where.key("nonmatch"))
    join = raw["join"]
    if isinstance(join, list) and join:
        names = None
        entries = [(where.key("join").index(i), entry) for i, entry in enumerate(join)]
    elif isinstance(join, dict) and join:
        names = tuple(str(name) for name in join)
        entries = [(where.key("join").key(str(name)), entry) for name, entry in join.items()]
    else:
        where.key("join").fail(f"expected a non-empty list or mapping of datasets, got {join!r}.")
    parts = []
    for at, entry in entries:
        part = check.mapping(entry, at, "a joined dataset")
        ref = parse_ref(part, at, ctx, frozenset({"nonmatch"}))
        if ref.nested is not None:
            at.key("path").fail("a joined dataset must be a prepared dataset, not a metadataset.")
        parts.append(JoinPart(ref, _nonmatch(part.get("nonmatch", default), at.key("nonmatch"))))
    return JoinNode(
        parts=tuple(parts),
        names=names,
        joiner=parse_object(raw.get("joiner"), where.key("joiner")),
        split_part=check.optional_string(raw, "split_part", where),
        subflavors=check.subflavors(raw, where),
        subset=_parse_subset(raw, where),
        shuffle_over_epochs_multiplier=check.shuffle_multiplier(raw, where),
        where=where,
        group=check.optional_string(raw, "group", where),
    )


def _parse_subset(raw: dict[str, Any], where: Where) -> SubsetRange | None:
    value = raw.get("subset")
    if value is None:
        return None
    at = where.key("subset")
    check.check_keys(check.mapping(value, at, "subset"), ("range",), at, "subset")
    try:
        return parse_range(value.get("range"))
    except ValueError as e:
        at.key("range").fail(f"{e}.", hint="Example: subset: {range: ['0%', '50%']}.")


def _relative_only(subset: SubsetRange | None, where: Where, what: str) -> None:
    if subset is not None and subset.absolute is not None:
        where.key("subset").fail(
            f"absolute ranges (sample indices) are not allowed on {what}: they are only "
            "allowed for a leaf dataset.",
            hint="Use percentages like ['0%', '50%'].",
        )


def _nonmatch(value: object, where: Where) -> Nonmatch:
    if value not in NONMATCH:
        where.fail(f"expected one of {', '.join(NONMATCH)}, got {value!r}.")
    return cast(Nonmatch, value)
