"""Read a metadataset YAML (Energon's ``MetadatasetV2``, or the older ``Metadataset``) into nodes.

Nested metadataset files are read too, eagerly, so every mistake shows up at load time with
the file and key path where it is; the data itself is not touched.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml

from stoker.errors import ConfigError, StokerError, StorageError
from stoker.metadataset import where as check
from stoker.metadataset.nodes import BlendItem, BlendNode, Metadataset, Node, Version
from stoker.metadataset.parse_nodes import Context, parse_node, parse_ref
from stoker.metadataset.paths import absolute, is_yaml, parent
from stoker.metadataset.where import Where
from stoker.storage import open_store, split_location

MODULES = ("megatron.energon", "stoker", "stoker.metadataset")
CLASSES: dict[str, Version] = {"MetadatasetV2": "v2", "Metadataset": "v1"}
V1_REF_KEYS = frozenset(
    {"path", "split_part", "subflavor", "subflavors", "shuffle_over_epochs_multiplier"}
    | {"dataset_config", "split_config", "weight"}
)


def load_metadataset(path: str) -> Metadataset:
    """Parse the metadataset at ``path`` (and every metadataset it nests) into a checked tree.

    Example:
        >>> md = load_metadataset("mix.yaml")
        >>> sorted(md.splits)
        ['train', 'val']
    """
    return _load(absolute(path), ())


def is_metadataset(path: str) -> bool:
    """Whether ``path`` is a metadataset: a ``.yaml``/``.yml`` file whose ``__class__`` is a
    metadataset class, or without ``__class__`` that has ``splits`` (Energon's V1 format).

    Example:
        >>> is_metadataset("/data/coco")  # a dataset folder
        False
    """
    if not is_yaml(path):
        return False
    try:
        raw = _read_yaml(absolute(path), None)
    except (StokerError, OSError, UnicodeDecodeError):
        return False
    if not isinstance(raw, dict):
        return False
    cls = raw.get("__class__")
    return cls in CLASSES or (cls is None and "__module__" not in raw and "splits" in raw)


def _load(path: str, stack: tuple[str, ...], referrer: Where | None = None) -> Metadataset:
    if path in stack:
        chain = " -> ".join((*stack, path))
        raise ConfigError(f"metadatasets include each other in a cycle: {chain}.", path=path)
    raw = _read_yaml(path, referrer)
    top = Where(path)
    version = _check_header(raw, top)
    ctx = Context(parent(path), lambda p, at: _load(p, (*stack, path), at))
    splits_raw = check.mapping(raw.get("splits"), top.key("splits"), "'splits'")
    if not splits_raw:
        top.key("splits").fail("no splits are defined.", hint="Add at least a 'train' split.")
    splits: dict[str, Node] = {}
    for name, node in splits_raw.items():
        at = top.key("splits").key(name)
        splits[name] = _v1_split(node, at, ctx) if version == "v1" else parse_node(node, at, ctx)
    return Metadataset(path, splits, version)


def _read_yaml(path: str, referrer: Where | None) -> Any:
    folder, name = split_location(path)
    store = open_store(folder)
    if not store.exists(name):
        if referrer is not None:
            referrer.fail(f"the metadataset file {path} does not exist.")
        raise StorageError("the metadataset file does not exist.", path=path)
    try:
        return yaml.safe_load(store.read_text(name))
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", path=path, hint="Fix the syntax.") from None


def _check_header(raw: object, top: Where) -> Version:
    """The format version from ``__module__`` / ``__class__``; Energon's default is V1."""
    data = check.mapping(raw, top, "a metadataset file")
    module, cls = data.get("__module__"), data.get("__class__")
    check.check_keys(data, ("__module__", "__class__", "splits"), top, "a metadataset file")
    if module is None and cls is None:
        return "v1"
    if module not in MODULES:
        problem = "is missing." if module is None else f"unknown module {module!r}."
        top.key("__module__").fail(problem, hint=f"Use one of: {', '.join(MODULES)}.")
    if cls not in CLASSES:
        top.key("__class__").fail(
            f"unknown metadataset class {cls!r}.", hint=f"Use one of: {', '.join(CLASSES)}."
        )
    return CLASSES[cls]


def _v1_split(raw: object, where: Where, ctx: Context) -> BlendNode:
    """A V1 split ``{datasets: [{weight, path, ...}]}``: always a weighted blend, as in Energon."""
    data = check.mapping(raw, where, "a split")
    check.check_keys(data, ("datasets",), where, "a V1 split")
    entries = data.get("datasets")
    if not isinstance(entries, list) or not entries:
        where.key("datasets").fail(f"expected a non-empty list of datasets, got {entries!r}.")
    items, total = [], 0.0
    for i, entry in enumerate(entries):
        at = where.key("datasets").index(i)
        ref_raw = dict(check.mapping(entry, at, "a dataset reference"))
        check.check_keys(ref_raw, V1_REF_KEYS, at, "a V1 dataset reference")
        weight = check.non_negative(ref_raw.pop("weight", 1), at.key("weight"))
        legacy = ref_raw.pop("subflavor", None)
        ref = parse_ref(ref_raw, at, ctx, frozenset())
        if legacy is not None and "__subflavor__" not in ref.subflavors:
            # Energon's legacy ``subflavor: x`` is ``subflavors: {__subflavor__: x}``.
            ref = replace(ref, subflavors={"__subflavor__": legacy, **ref.subflavors})
        items.append(BlendItem(ref, weight))
        total += weight
    if total <= 0:
        where.key("datasets").fail("every weight is 0, so the blend is empty.")
    return BlendNode("weighted", tuple(items), None, where)
