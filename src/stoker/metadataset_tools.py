"""Energon's ``traverse_metadataset`` and ``prepare_metadataset``, over stoker's parser.

``traverse_metadataset`` lists the leaf datasets one split reads, with the subflavors the
metadataset hierarchy gives them (not those of each dataset's own ``dataset.yaml``), without
opening any dataset. ``prepare_metadataset`` builds the join index of every join, as
``stoker prepare mds.yaml`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError
from stoker.joins import JoinReport, prepare_joins
from stoker.metadataset import flatten, is_metadataset, load_metadataset
from stoker.storage.epath import EPath


@dataclass
class TraversedDatasetReference:
    """One leaf dataset of a metadataset split (Energon's class of the same name)."""

    path: EPath
    split_part: str
    aux: dict[str, EPath] = field(default_factory=dict)
    subflavors: dict[str, Any] = field(default_factory=dict)


def traverse_metadataset(
    path: str | os.PathLike[str] | EPath, *, split_part: str, **kwargs: Any
) -> list[TraversedDatasetReference]:
    """The leaf datasets of ``split_part``, nested metadatasets resolved, in blend order.

    Subflavors merge as when loading (outer levels win); a reference's ``split_part`` applies
    to everything below it. Datasets are not opened, so a missing one is still listed.
    Joins are not supported (as in Energon: ``NotImplementedError``).

    Example:
        >>> refs = traverse_metadataset("/cfg/mix.yaml", split_part="train")  # doctest: +SKIP
        >>> [(str(r.path), r.subflavors) for r in refs]  # doctest: +SKIP
        [('/data/coco', {'source': 'coco'}), ('/data/coyo', {})]
    """
    location = _metadataset_path(path, "traverse_metadataset")
    plan = flatten(load_metadataset(location), split_part, training=False)
    out = []
    for leaf in plan.leaves:
        if leaf.join is not None:
            raise NotImplementedError("traverse_metadataset() does not support joined datasets.")
        out.append(
            TraversedDatasetReference(
                path=EPath(leaf.path),
                split_part=leaf.split_part,
                aux={name: EPath(ref.path) for name, ref in leaf.aux.items()},
                subflavors=dict(leaf.subflavors),
            )
        )
    return out


def prepare_metadataset(
    path: str | os.PathLike[str] | EPath, *, allowed_modules: tuple[str, ...] = ()
) -> list[JoinReport]:
    """Build the join index of every join of every split (what ``stoker prepare mds.yaml`` does).

    Energon's function returns nothing; stoker returns one report per join (empty without
    joins). ``allowed_modules`` lets joiners from those modules be named.

    Example:
        >>> [r.matched for r in prepare_metadataset("/cfg/joined.yaml")]  # doctest: +SKIP
        [(1000,)]
    """
    location = _metadataset_path(path, "prepare_metadataset")
    return prepare_joins(location, allowed_modules=allowed_modules)


def _metadataset_path(path: str | os.PathLike[str] | EPath, caller: str) -> str:
    location = path if isinstance(path, str) else str(path)
    if not is_metadataset(location):
        raise ConfigError(
            f"{caller} needs a metadataset YAML file, got {location!r}.",
            hint="Pass a .yaml file with splits: (MetadatasetV2, or V1 with datasets: lists).",
        )
    return location
