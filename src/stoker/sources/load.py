"""``load_source``: read the meta files of a dataset (tar shards, JSONL, Megatron ``.bin``/``.idx``,
Parquet) once in the main process and return its :class:`~stoker.sources.source.DataSource`,
with the classes its ``dataset.yaml`` names checked (:mod:`stoker.sources.allow`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError, StokerError, StorageError
from stoker.format.binidx import token_dataset
from stoker.format.brace import expand
from stoker.format.dataset_config import DatasetConfig, read_dataset_config
from stoker.format.jsonl import jsonl_index_name
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    DEFAULT_SPLIT_CONFIG,
    INDEX_SQLITE,
    read_info,
    read_split_config,
)
from stoker.format.parquet import SUFFIX, is_parquet_dataset
from stoker.format.shard_scan import scan_shard
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.format.tar_index import sample_count
from stoker.sources.allow import resolve_source
from stoker.sources.binidx import binidx_source
from stoker.sources.field_map import load_part_filter, load_sample_loader
from stoker.sources.parquet_source import parquet_config, parquet_files_source, parquet_split
from stoker.sources.source import CRUDE_JSONL, DataSource, EmptyDatasetError
from stoker.storage import Store, open_store, split_location


def load_source(
    path: str | Sequence[str],
    *,
    split_part: str = "train",
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
    subflavors: dict[str, Any] | None = None,
    allowed_modules: tuple[str, ...] = (),
    trust_sample_loader: bool = False,
    sample_type: type | None = None,
    allow_outside_paths: bool | None = None,
) -> DataSource:
    """Read the meta files of the dataset at ``path`` (a folder, a ``.jsonl`` file, a
    ``.bin``/``.idx`` pair named by either file or their common prefix, or one ``.parquet``
    file or a list of them).

    Classes the ``dataset.yaml`` names from other modules than stoker's are imported and
    checked against the allow-list here, in the main process (see :mod:`stoker.sources.allow`).
    A ``split_config:`` key in the dataset.yaml wins over ``split_config`` (as in Energon).

    Args:
        sample_type: If given, the dataset's samples must be of this class or a subclass.
        allow_outside_paths: Let ``.info.json`` and the split config name shards outside the
            dataset folder (``..``, absolute paths); default: ``STOKER_ALLOW_OUTSIDE_PATHS``.

    Example:
        >>> source = load_source("coco-wds", split_part="val")
        >>> source.total
        10
    """
    used_split: str | None = None
    if not isinstance(path, str) or path.endswith(SUFFIX):  # .parquet file(s) named
        names = [path] if isinstance(path, str) else [str(p) for p in path]
        source = parquet_files_source(names, split_part, subflavors)
    elif path.endswith(".jsonl"):
        source = _jsonl_source(path, split_part, subflavors or {})
    elif (bin_path := token_dataset(path, prefix=False)) is not None:
        source = binidx_source(bin_path, split_part, subflavors or {})
    else:
        try:
            store = open_store(path)
            if is_parquet_dataset(store):
                config = parquet_config(store, dataset_config, allowed_modules)
            else:
                config = read_dataset_config(store, dataset_config, allowed_modules=allowed_modules)
            used_split = config.split_config or split_config
            source = load_split(
                path,
                split_part=split_part,
                split_config=used_split,
                config=config,
                subflavors=subflavors,
                trust_sample_loader=trust_sample_loader,
                allow_outside_paths=allow_outside_paths,
                store=store,
            )
        except StokerError:  # not a dataset folder: a .bin/.idx prefix (as Megatron names it)?
            if (bin_path := token_dataset(path)) is None:
                raise
            used_split = None
            source = binidx_source(bin_path, split_part, subflavors or {})
    source = resolve_source(
        source,
        allowed_modules=allowed_modules,
        sample_type=sample_type,
        split_config=used_split,
        config_name=dataset_config,
    )
    if (loader := source.config.sample_loader) is not None:  # untrusted code: say so now
        load_sample_loader(source.root, loader, source.trust_sample_loader)
        load_part_filter(source.root, source.config.part_filter, source.trust_sample_loader)
    return source


def load_split(
    path: str,
    *,
    split_part: str,
    split_config: str,
    config: DatasetConfig,
    subflavors: dict[str, Any] | None = None,
    trust_sample_loader: bool = False,
    allow_outside_paths: bool | None = None,
    store: Store | None = None,
) -> DataSource:
    """The shards and counts of one split of the dataset at ``path``, loaded per ``config``.

    Raises:
        ConfigError: the split lists a shard twice, has no samples, or names a shard outside
            the dataset folder (unless ``allow_outside_paths``).
    """
    store = store or open_store(path)  # the caller's: what it asked is not asked again
    if is_parquet_dataset(store):
        return parquet_split(path, store, split_part, config, subflavors, trust_sample_loader)  # type: ignore[no-any-return]
    info = read_info(store, allow_outside_paths=allow_outside_paths)
    split = read_split_config(store, split_config, allow_outside_paths=allow_outside_paths)
    shards = split.shards(split_part)
    missing = [name for name in shards if name not in info.shard_counts]
    if missing:
        raise ConfigError(
            f"split {split_part!r} names shard {missing[0]!r}, which .info.json does not list.",
            path=store.url(f".nv-meta/{split_config}"),
            hint="Prepare the dataset again, or fix the split config.",
        )
    where = store.url(f".nv-meta/{split_config}")
    _check_no_duplicates(shards, split_part, where)
    counts = np.array([info.shard_counts[name] for name in shards], dtype=np.int64)
    excluded = _excluded_indices(store, shards, counts, split.excluded_samples())
    if int(counts.sum()) - len(excluded) <= 0:
        if not expand(split.split_parts[split_part]):
            problem = f"no shards in split part {split_part!r}."
        elif split.exclude:
            problem = (
                f"split {split_part!r} has no samples: every shard or sample in it is excluded."
            )
        else:
            problem = f"split {split_part!r} has no samples: its shards are empty."
        raise EmptyDatasetError(
            problem,
            path=where,
            hint="Fix split_parts / exclude in the split config, or load another split part.",
        )
    merged = {**config.subflavors, **(subflavors or {})}
    return DataSource(
        path,
        split_part,
        tuple(shards),
        counts,
        config,
        excluded,
        False,
        merged,
        trust_sample_loader,
    )


def _check_no_duplicates(shards: list[str], split_part: str, where: str) -> None:
    """A shard listed twice would deliver each of its samples twice per epoch: refuse it."""
    seen: set[str] = set()
    for name in shards:
        if name in seen:
            raise ConfigError(
                f"split {split_part!r} lists shard {name!r} more than once.",
                path=where,
                hint="List each shard once in split_parts (check overlapping brace patterns).",
            )
        seen.add(name)


def _jsonl_source(path: str, split_part: str, subflavors: dict[str, Any]) -> DataSource:
    parent, name = split_location(path)
    store = open_store(parent)
    index = jsonl_index_name(name)
    if not store.exists(index):
        raise StorageError(
            "the JSONL file has no index.",
            path=path,
            hint=f"Run `stoker prepare {path}` first.",
        )
    count = sample_count(store.size(index), store.url(index))
    counts = np.array([count], dtype=np.int64)
    return DataSource(
        path, split_part, (name,), counts, CRUDE_JSONL, jsonl=True, subflavors=subflavors
    )


def _excluded_indices(
    store: Store,
    shards: list[str],
    counts: npt.NDArray[np.int64],
    by_shard: dict[str, set[str]],
) -> npt.NDArray[np.int64]:
    """Global split indices of samples excluded by ``shard.tar/key`` entries."""
    wanted = {name: keys for name, keys in by_shard.items() if name in shards}
    if not wanted:
        return np.zeros(0, np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    position = {name: i for i, name in enumerate(shards)}
    found: list[int] = []
    db = SqliteIndexReader(local) if (local := store.cached_local_path(INDEX_SQLITE)) else None
    for name, keys in wanted.items():
        if db is not None:
            located = [db.locate(key) for key in keys]
            indices = [loc.index for loc in located if loc is not None]
        else:
            scanned = scan_shard(store, name)
            indices = [i for i, key in enumerate(scanned.keys) if key in keys]
        found.extend(int(starts[position[name]]) + i for i in indices)
    if db is not None:
        db.close()
    return np.unique(np.array(found, dtype=np.int64))
