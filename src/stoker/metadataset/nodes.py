"""The validated tree of a metadataset: plain frozen values, paths already resolved.

A split is one :data:`Node`: a :class:`DatasetRef` (a prepared dataset, or another metadataset
file, then ``nested`` holds it), a :class:`BlendNode` (weighted or epochized) or a
:class:`JoinNode`. Nothing here reads data; :func:`stoker.metadataset.flatten` walks the tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from stoker.metadataset.subset import SubsetRange
from stoker.metadataset.where import Where
from stoker.plan.weights import Weight
from stoker.storage.epath import EPath

Nonmatch = Literal["error", "skip", "none"]
BlendKind = Literal["weighted", "epochized"]
Version = Literal["v1", "v2"]


@dataclass(frozen=True)
class AuxRef:
    """An auxiliary source for cooking: a prepared dataset, or plain files (``filesystem://``)."""

    path: str
    filesystem: bool = False

    @property
    def fs_path(self) -> EPath:
        """The path as an :class:`~stoker.EPath` (Energon's ``AuxFilesystemReference``)."""
        return EPath(self.path)


@dataclass(frozen=True)
class DatasetRef:
    """``{path: ...}``: a dataset folder / ``.jsonl`` file, or a nested metadataset YAML.

    Example:
        >>> DatasetRef("/data/coco", split_part="val").nested is None
        True
    """

    path: str
    split_part: str | None = None
    subflavors: dict[str, Any] = field(default_factory=dict)
    subset: SubsetRange | None = None
    #: 1 unless given; -1 samples without replacement; None turns it off (wins over all).
    shuffle_over_epochs_multiplier: int | None = 1
    dataset_config: str | None = None
    split_config: str | None = None
    aux: dict[str, AuxRef] = field(default_factory=dict)
    nested: Metadataset | None = None
    where: Where = field(default=Where(""), compare=False, repr=False)
    #: Packing group (Energon's ``group:``): see :mod:`stoker.pipeline.pack_groups`.
    group: str | None = None


@dataclass(frozen=True)
class BlendItem:
    """One entry of a blend: the node and its ``weight`` (weighted) or ``repetitions``."""

    node: Node
    factor: Weight  #: a number, or a schedule (weighted blends only)

    # Energon's names of a blend entry (its ``BlendDatasetReference``), for code that reads them.
    @property
    def path(self) -> EPath:
        """The entry's dataset path (a :class:`DatasetRef`'s) as an :class:`~stoker.EPath`."""
        if not isinstance(self.node, DatasetRef):
            raise AttributeError(f"a blend entry of a {type(self.node).__name__} has no path")
        return EPath(self.node.path)

    @property
    def aux(self) -> dict[str, AuxRef] | None:
        """The entry's aux sources (None where it has none)."""
        return (self.node.aux or None) if isinstance(self.node, DatasetRef) else None


@dataclass(frozen=True)
class BlendNode:
    """``{blend: [...]}`` (kind ``weighted``) or ``{blend_epochized: [...]}`` (``epochized``)."""

    kind: BlendKind
    items: tuple[BlendItem, ...]
    subset: SubsetRange | None = None
    where: Where = field(default=Where(""), compare=False, repr=False)
    #: Packing group of everything in the blend (inner groups are joined to it with ``+``).
    group: str | None = None

    @property
    def blend(self) -> tuple[BlendItem, ...]:
        """The entries, by Energon's name (``MetadatasetBlend.blend``)."""
        return self.items


@dataclass(frozen=True)
class JoinPart:
    """One dataset of a join and what to do with samples that the others lack."""

    ref: DatasetRef
    nonmatch: Nonmatch = "error"


@dataclass(frozen=True)
class ObjectRef:
    """An importable class or function named in YAML (``__module__`` + ``__class__``)."""

    module: str
    name: str
    is_function: bool = False


@dataclass(frozen=True)
class JoinNode:
    """``{join: [...] | {name: ...}, joiner: ...}``: samples of several datasets matched by key.

    ``names`` is None for the list form, else the names of ``parts`` in order.
    """

    parts: tuple[JoinPart, ...]
    names: tuple[str, ...] | None = None
    joiner: ObjectRef | None = None
    split_part: str | None = None
    subflavors: dict[str, Any] = field(default_factory=dict)
    subset: SubsetRange | None = None
    shuffle_over_epochs_multiplier: int | None = 1
    where: Where = field(default=Where(""), compare=False, repr=False)
    #: Packing group of the joined samples.
    group: str | None = None


Node = DatasetRef | BlendNode | JoinNode


@dataclass(frozen=True)
class Metadataset:
    """A parsed metadataset file: its location and one node per split (train, val, test, ...)."""

    path: str
    splits: dict[str, Node]
    version: Version = "v2"
