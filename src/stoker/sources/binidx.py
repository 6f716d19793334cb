"""A Megatron token dataset (``.bin`` + ``.idx``) as a data source: one shard, one sample per
sequence, no ``.nv-meta`` needed.

Example:
    >>> bin_path = token_dataset("corpus_text_document")
    >>> source = binidx_source(bin_path, "train", {})
    >>> source.shards, source.total
    (('corpus_text_document.bin',), 1000)
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from stoker.errors import StorageError
from stoker.format.binidx import HEADER, TokenIndex, idx_name, token_dataset
from stoker.format.dataset_config import DatasetConfig
from stoker.model.samples import SourceInfo
from stoker.pipeline.read_binidx import BinIdxReader
from stoker.sources.aux import FileStore
from stoker.sources.source import DataSource
from stoker.storage import open_store, split_location

__all__ = ["CRUDE_TOKENS", "BinIdxFileStore", "binidx_source", "token_dataset"]

#: Token sequences are crude samples (a ``tokens`` array, no sample type).
CRUDE_TOKENS = DatasetConfig(sample_type=None, sample_module="stoker")


def binidx_source(bin_path: str, split_part: str, subflavors: dict[str, Any]) -> DataSource:
    """The source of the ``.bin`` at ``bin_path`` (its index header read for the count)."""
    parent, name = split_location(bin_path)
    store = open_store(parent)
    for needed in (name, idx_name(name)):
        if not store.exists(needed):
            raise StorageError(
                f"the token dataset's {needed.rsplit('.', 1)[-1]} file is missing.",
                path=store.url(needed),
                hint="A Megatron token dataset is a .bin with its .idx beside it; "
                "check the path (the .bin, the .idx or their common prefix).",
            )
    where = store.url(idx_name(name))
    _, count, _ = TokenIndex.header(store.read_range(idx_name(name), 0, HEADER.size), where)
    return DataSource(
        bin_path,
        split_part,
        (name,),
        np.array([count], dtype=np.int64),
        CRUDE_TOKENS,
        subflavors=subflavors,
        binidx=True,
    )


class BinIdxFileStore(FileStore):
    """The sequences of a token dataset by number (``"12"`` or ``"12.tokens"``): their arrays.

    Example:
        >>> BinIdxFileStore("corpus_text_document.bin").get("3")[-2:]  # ends with its EOD
        array([20119,     0], dtype=int32)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        bin_path = token_dataset(self.path) or self.path
        parent, name = split_location(bin_path)
        self._reader = BinIdxReader(open_store(parent), [name])

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        number = key.removesuffix(".tokens")
        if not number.isdigit() or int(number) >= len(self._reader.index(0)):
            raise self._missing(key)
        raw = self._reader.read(0, int(number))
        info = SourceInfo(
            dataset_path=self.path, index=int(number), shard_name=raw.shard, file_names=(key,)
        )
        return raw.parts["tokens"], info

    def get_path(self) -> str:
        return self.path
