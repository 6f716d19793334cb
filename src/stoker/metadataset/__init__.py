"""Metadatasets: Energon's YAML that blends, nests, subsets and joins prepared datasets.

``load_metadataset`` parses a file (and the files it nests) into a checked tree of plain values;
``flatten`` turns one split of it into the leaves the loader reads, with their weights.

Example:
    >>> md = load_metadataset("mix.yaml")
    >>> plan = flatten(md, "train")
    >>> plan.kind, [round(leaf.weight, 3) for leaf in plan.leaves]
    ('weighted', [0.7, 0.3])
"""

from stoker.metadataset.flatten import BlendPlan, Leaf, flatten
from stoker.metadataset.loaded import DatasetBlendMode, LoadedDataset, LoadedDatasetList
from stoker.metadataset.nodes import (
    AuxRef,
    BlendItem,
    BlendNode,
    DatasetRef,
    JoinNode,
    JoinPart,
    Metadataset,
    Node,
    ObjectRef,
)
from stoker.metadataset.parse import is_metadataset, load_metadataset
from stoker.metadataset.subset import SubsetRange

__all__ = [
    "AuxRef",
    "BlendItem",
    "BlendNode",
    "BlendPlan",
    "DatasetBlendMode",
    "DatasetRef",
    "JoinNode",
    "JoinPart",
    "Leaf",
    "LoadedDataset",
    "LoadedDatasetList",
    "Metadataset",
    "Node",
    "ObjectRef",
    "SubsetRange",
    "flatten",
    "is_metadataset",
    "load_metadataset",
]
