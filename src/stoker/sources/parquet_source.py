"""The data source of a Parquet dataset (:mod:`stoker.format.parquet`): one split's files.

Without a ``.nv-meta/dataset.yaml`` the samples are crude (column -> value); ``stoker prepare
FOLDER --sample-type ... --field-map ...`` writes one for typed samples, whose field map names
columns where a tar dataset's names parts.
"""

from __future__ import annotations

from typing import Any

from stoker.format.dataset_config import DatasetConfig, read_dataset_config
from stoker.format.meta import META_DIR
from stoker.format.parquet import scan_parquet
from stoker.storage import Store

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
) -> Any:
    """The :class:`~stoker.sources.source.DataSource` of ``split_part``'s Parquet files."""
    from stoker.sources.source import DataSource, EmptyDatasetError

    layout = scan_parquet(store, split_part)
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
    )
