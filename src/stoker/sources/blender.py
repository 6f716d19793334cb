"""``Blender`` and ``load_dataset``: metadatasets in Python instead of YAML."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.errors import ConfigError
from stoker.metadataset import Metadataset, is_metadataset
from stoker.storage.epath import EPath


@dataclass(frozen=True)
class Blender:
    """A weighted blend of datasets, usable wherever a dataset path goes.

    For training the datasets are interleaved by weight (like a metadataset ``blend``); for
    validation they are concatenated.

    Example:
        >>> blend = Blender([("/data/coco", 5), ("/data/coyo", 2)])
        >>> ds = get_train_dataset(blend, worker_config=wc, batch_size=32,  # doctest: +SKIP
        ...                        shuffle_buffer_size=100, max_samples_per_sequence=100)
    """

    datasets: Sequence[tuple[str, float]]  #: paths may also be pathlib.Path or EPath

    def __post_init__(self) -> None:
        if not self.datasets:
            raise ConfigError("a Blender needs at least one (path, weight) pair.")
        for item in self.datasets:
            if len(item) != 2 or not isinstance(item[1], int | float) or item[1] < 0:
                raise ConfigError(
                    f"invalid Blender entry {item!r}.",
                    hint="Pass (path, weight) pairs with weights >= 0.",
                )
        if not any(weight > 0 for _, weight in self.datasets):
            raise ConfigError("a Blender needs at least one positive weight.")
        paths = tuple((location(path), weight) for path, weight in self.datasets)
        object.__setattr__(self, "datasets", paths)


def location(path: str | os.PathLike[str] | EPath) -> str:
    """A path given as ``str``, ``pathlib.Path`` or :class:`~stoker.EPath`, as a string."""
    return path if isinstance(path, str) else str(path)


def load_dataset(path: str | os.PathLike[str] | EPath) -> Metadataset | str:
    """Check ``path`` and return what ``get_*_dataset`` accept: a parsed metadataset (with
    Energon's ``get_datasets``, see
    :class:`~stoker.flavors.metadataset_tools.LoadedMetadataset`) or the path.

    Example:
        >>> mds = load_dataset("/data/blend.yaml")  # doctest: +SKIP
        >>> sorted(mds.splits)  # doctest: +SKIP
        ['train', 'val']
    """
    path = location(path)
    if is_metadataset(path):
        from stoker.flavors.metadataset_tools import (
            loaded_metadataset,  # reads datasets: a layer above
        )

        return loaded_metadataset(path)
    from stoker.errors import StokerError
    from stoker.format.meta import read_info
    from stoker.sources.binidx import token_dataset
    from stoker.storage import open_store

    if path.endswith(".jsonl") or token_dataset(path, prefix=False) is not None:
        return path
    try:
        read_info(open_store(path))  # a clear error if the folder is not prepared
    except StokerError:
        if token_dataset(path) is None:  # nor a .bin/.idx prefix
            raise
    return path
