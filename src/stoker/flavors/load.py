"""``load_dataset``: what ``get_*_dataset`` accept, from a path (Energon's function): a parsed
metadataset that can list its datasets, or the checked path of one prepared dataset."""

from __future__ import annotations

import os

from stoker.errors import StokerError
from stoker.format.binidx import token_dataset
from stoker.format.meta import read_info
from stoker.metadataset import Metadataset, is_metadataset
from stoker.sources.blender import location
from stoker.storage import open_store
from stoker.storage.epath import EPath


def load_dataset(path: str | os.PathLike[str] | EPath) -> Metadataset | str:
    """Check ``path`` and return what ``get_*_dataset`` accept: a parsed metadataset (with
    Energon's ``get_datasets``, see
    :class:`~stoker.flavors.metadataset_tools.LoadedMetadataset`) or the path.

    Example:
        >>> mds = load_dataset("mix.yaml")
        >>> sorted(mds.splits)
        ['train', 'val']
        >>> load_dataset("coco-wds")
        'coco-wds'
    """
    path = location(path)
    if is_metadataset(path):
        from stoker.flavors.metadataset_tools import loaded_metadataset  # torch: only if used

        return loaded_metadataset(path)
    if path.endswith((".jsonl", ".parquet")) or token_dataset(path, prefix=False) is not None:
        return path
    try:
        read_info(open_store(path))  # a clear error if the folder is not prepared
    except StokerError:
        if token_dataset(path) is None:  # nor a .bin/.idx prefix
            raise
    return path
