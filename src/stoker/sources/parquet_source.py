"""The data source of a Parquet dataset (:mod:`stoker.format.parquet`): one split's files.

Without a ``.nv-meta/dataset.yaml`` the samples are crude (column -> value); ``stoker prepare
FOLDER --sample-type ... --field-map ...`` writes one for typed samples, whose field map names
columns where a tar dataset's names parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.errors import ConfigError, StorageError
from stoker.format.dataset_config import DatasetConfig, read_dataset_config
from stoker.format.meta import META_DIR
from stoker.format.parquet import SUFFIX, scan_parquet
from stoker.storage import Store, open_store, split_location

#: The config of a Parquet folder without a dataset.yaml: crude samples.
CRUDE_PARQUET = DatasetConfig(sample_type=None, sample_module="stoker")


def parquet_config(store: Store, name: str, allowed_modules: tuple[str, ...]) -> DatasetConfig:
    """The folder's ``.nv-meta/<name>`` if there is one, else crude samples."""
    if not store.exists(f"{META_DIR}/{name}"):
        return CRUDE_PARQUET
    return read_dataset_config(store, name, allowed_modules=allowed_modules)


def parquet_split(
    path: str,
    store: Store,
    split_part: str,
    config: DatasetConfig,
    subflavors: dict[str, Any] | None,
    trust_sample_loader: bool,
    files: list[str] | None = None,
) -> Any:
    """The :class:`~stoker.sources.source.DataSource` of ``split_part``'s Parquet files (or of
    ``files``, names in ``store``, whatever the split)."""
    from stoker.sources.source import DataSource, EmptyDatasetError

    layout = scan_parquet(store, split_part, files)
    if int(layout.rows.sum()) <= 0:
        raise EmptyDatasetError(
            f"the Parquet files of split {split_part!r} have no rows.",
            path=path,
            hint="Load another split, or add rows.",
        )
    return DataSource(
        path,
        split_part,
        layout.files,
        layout.rows,
        config,
        subflavors={**config.subflavors, **(subflavors or {})},
        trust_sample_loader=trust_sample_loader,
        parquet=True,
        media=layout.media,
        columns=layout.columns,
    )


def parquet_files_source(
    paths: Sequence[str], split_part: str, subflavors: dict[str, Any] | None
) -> Any:
    """The source of the ``.parquet`` files named (one, or a list): crude samples, rows in the
    order given. Its path is the one file, or the folder the files share (their root)."""
    if not paths:
        raise ConfigError("the list of Parquet files is empty.", hint="Name one or more files.")
    for named in paths:
        if not named.endswith(SUFFIX):
            raise ConfigError(
                "a list of dataset paths must name .parquet files.",
                path=named,
                hint="Pass one dataset folder or file, or a list of .parquet files.",
            )
    common = split_location(paths[0])[0].split("/")
    for named in paths[1:]:
        parent = split_location(named)[0].split("/")
        same = 0
        while same < min(len(common), len(parent)) and common[same] == parent[same]:
            same += 1
        common = common[:same]
    if "://" in paths[0] and len(common) < 3:  # ["s3:", "", "bucket", ...]
        raise ConfigError(
            "the Parquet files of one list must be in one bucket.", path=", ".join(paths)
        )
    root = "/".join(common) or "/"
    names = [p[len(root) :].lstrip("/") for p in paths]
    store = open_store(root)
    for named, name in zip(paths, names, strict=True):
        if not store.exists(name):
            raise StorageError("the Parquet file is missing.", path=named, hint="Check the path.")
    location = paths[0] if len(paths) == 1 else root
    return parquet_split(location, store, split_part, CRUDE_PARQUET, subflavors, False, files=names)
