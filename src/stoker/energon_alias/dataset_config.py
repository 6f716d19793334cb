"""Energon's ``megatron.energon.dataset_config.load_config``, for the configs stoker reads.

Energon's ``load_config`` builds any object a YAML file describes (``__module__`` +
``__class__``). Client code calls it on a metadataset YAML, to list the datasets of a split;
stoker serves that: the result is :func:`stoker.load_dataset`'s, with Energon's
``post_initialize`` and ``get_datasets``. Any other config is refused with what to use instead.

Example:
    >>> from stoker import MetadatasetV2
    >>> mds = load_config("mix.yaml", default_type=MetadatasetV2)
    >>> mds.post_initialize()
    >>> found = mds.get_datasets(training=False, split_part="train", worker_config=wc)
    >>> [(d.dataset.paths[0].name, d.weight) for d in found.datasets]
    [('coco-wds', 0.7), ('coyo-wds', 0.3)]
"""

from __future__ import annotations

import os
from typing import Any

from stoker.errors import ConfigError
from stoker.flavors.metadataset_tools import LoadedMetadataset, loaded_metadataset
from stoker.metadataset import is_metadataset
from stoker.storage.epath import EPath


def load_config(
    path: str | os.PathLike[str] | EPath | Any,
    *,
    default_type: type[Any] | None = None,
    strict: bool = True,
    default_kwargs: dict[str, Any] | None = None,
) -> LoadedMetadataset | Any:
    """The metadataset at ``path`` (a :class:`LoadedMetadataset`); an object that already is a
    ``default_type`` comes back as it is. ``strict`` and ``default_kwargs`` are accepted for
    Energon's signature (the YAML's own path is where relative dataset paths start)."""
    if default_type is not None and isinstance(path, default_type):
        return path
    location = str(path)
    if not isinstance(path, (str, os.PathLike, EPath)) or not is_metadataset(location):
        raise ConfigError(
            f"load_config under stoker reads a metadataset YAML, not {location!r}.",
            hint="Pass a MetadatasetV2 .yaml file; for a dataset folder use "
            "stoker.get_dataset_from_config, for any path stoker.load_dataset.",
        )
    return loaded_metadataset(location)
