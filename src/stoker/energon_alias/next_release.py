"""Names that Energon's next release adds (its open pull requests), and where stoker serves them.

The same two shapes as :mod:`stoker.energon_alias.table`, which merges them in: ``NEXT_SAME_NAME``
maps a module path (relative to ``megatron.energon``) to names served as ``stoker.<same name>``;
``NEXT_ELSEWHERE`` maps it to ``{name: "stoker.module:attr"}``. Each entry names its pull request,
so when Energon releases it the entry can move to the table of that release.

Example:
    >>> NEXT_ELSEWHERE["weights"]["ScheduledWeight"]
    'stoker.flavors.weights:ScheduledWeight'
"""

from __future__ import annotations

_BINIDX = "BinIdxDatasetFactory DefaultBinIdxDatasetFactory"  # #227: Megatron .bin/.idx tokens
_LOGICAL = "LogicalWorkerAssignment skip_safe"  # #236: logical workers

NEXT_SAME_NAME: dict[str, str] = {
    "": f"{_BINIDX} {_LOGICAL}",
    "logical_worker": "LogicalWorkerAssignment",
    "worker": "LogicalWorkerAssignment",
    "task_encoder": "skip_safe",
    "task_encoder.base": "skip_safe get_skip_safe",
    "flavors": _BINIDX,
    "flavors.binidx": _BINIDX,
    "flavors.binidx.binidx_dataset": _BINIDX,
}


def _from(module: str, names: str) -> dict[str, str]:
    """``{name: "module:name"}`` for each name in ``names``."""
    return {name: f"{module}:{name}" for name in names.split()}


_DATALOADER = _from(  # #162: Energon's own loader, with thread workers
    "stoker.energon_alias.dataloader",
    "DataLoader DataLoaderWorker ForkDataLoaderWorker ThreadDataLoaderWorker",
)
_PARQUET = {"DefaultParquetDatasetFactory": "stoker.flavors.parquet:DefaultParquetDatasetFactory"}

NEXT_ELSEWHERE: dict[str, dict[str, str]] = {
    # #208: weight schedules
    "weights": _from(
        "stoker.flavors.weights",
        "ConstantWeight NormalizedWeight ScaledWeight ScheduledWeight WeightLike WeightSpec "
        "compose_weights eval_weight is_scheduled_weight make_node_entry_weights "
        "weight_from_config weight_to_config",
    ),
    # the end-of-data synchronisation across ranks (Energon's develop branch)
    "sync_end": _from(
        "stoker.runtime.end_sync_loaders",
        "RedistributeDataLoaderState RedistributeLoader StopFirstDataLoaderState StopFirstLoader",
    ),
    # #227: Parquet datasets and token (.bin/.idx) datasets, and their file stores
    "flavors.parquet": _PARQUET,
    "flavors.parquet.dataset": _PARQUET,
    "flavors.parquet.prepare": _from(
        "stoker.energon_alias.parquet_layout", "ParquetFileEntry ParquetLayout parse_parquet_layout"
    ),
    "cache.file_store": {
        "BinIdxFileStore": "stoker.sources.binidx:BinIdxFileStore",
        "ParquetFileStore": "stoker.sources.parquet_store:ParquetFileStore",
    },
    # #236: logical workers
    "wrappers.stride_dataset": {"_stride_needed": "stoker.model.logical_workers:stride_needed"},
    "dataloader": _DATALOADER,
    "dataloader.workers": _DATALOADER,
    # #249: GPU image decoding
    "flavors.webdataset.nvimagecodec_decoder": {
        "NVImageCodecDecoder": "stoker.media.gpu_image_decoder:NVImageCodecDecoder"
    },
}
