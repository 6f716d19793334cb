"""Preview a metadataset: one report per dataset of a split, with its weight and realised share.

Each dataset the split blends (or concatenates) is previewed on its own; its header also says
the weight the metadataset gives it and how many samples it contributed to the first batches
the loader really draws from the blend (with no decoding: only the references are counted).

Example:
    >>> import os
    >>> reports = preview_metadataset("mix.yaml", num_samples=4)
    >>> [(os.path.basename(r.path), r.info["weight"], r.info["drawn"])
    ...  for r in reports]  # doctest: +NORMALIZE_WHITESPACE
    [('coco-wds', '0.7', '112 of 160 (70.0%) in the first 10 batches'),
     ('coyo-wds', '0.3', '48 of 160 (30.0%) in the first 10 batches')]
"""

from __future__ import annotations

import dataclasses
from typing import Any

from stoker.metadataset.flatten import Leaf, flatten
from stoker.metadataset.parse import is_metadataset, load_metadataset
from stoker.preview.read import preview_dataset
from stoker.preview.report import PreviewReport

__all__ = ["is_metadataset", "preview_metadataset"]

#: Samples per batch when counting what the blend draws.
BLEND_BATCH = 16


def preview_metadataset(
    path: str,
    *,
    split_part: str = "train",
    num_samples: int = 5,
    blend_batches: int = 10,
    **options: Any,
) -> list[PreviewReport]:
    """A report per dataset of ``split_part``; ``options`` go to :func:`preview_dataset`."""
    leaves = flatten(load_metadataset(path), split_part).leaves
    drawn = _drawn(path, split_part, blend_batches) if blend_batches > 0 else {}
    total = sum(drawn.values())
    reports = []
    for leaf in leaves:
        report = preview_dataset(
            leaf.path, split_part=leaf.split_part, num_samples=num_samples, **options
        )
        info = {**report.info, **_share(leaf, drawn.get(leaf.path), total, blend_batches)}
        reports.append(dataclasses.replace(report, split_part=split_part, info=info))
    return reports


def _share(leaf: Leaf, count: int | None, total: int, batches: int) -> dict[str, str]:
    info = {}
    if leaf.weight is not None:
        info["weight"] = f"{leaf.weight:.3g}"
    if leaf.repetitions is not None:
        info["repetitions"] = f"{leaf.repetitions:g}"
    if leaf.split_part != "train":
        info["split part"] = leaf.split_part
    if count is not None and total:
        info["drawn"] = f"{count} of {total} ({count / total:.1%}) in the first {batches} batches"
    return info


def _drawn(path: str, split_part: str, batches: int) -> dict[str, int]:
    """Samples per dataset path in the first ``batches`` batches of the training loader."""
    from stoker.api import get_loader, get_train_dataset
    from stoker.model.task import DefaultTaskEncoder
    from stoker.model.worker_config import WorkerConfig

    encoder: DefaultTaskEncoder[Any, Any, Any, Any] = DefaultTaskEncoder()
    encoder.decoder = None  # references are what is counted: skip decoding
    dataset = get_train_dataset(
        path,
        split_part=split_part,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=BLEND_BATCH,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=encoder,
    )
    with get_loader(dataset) as loader:
        for step, _ in enumerate(loader):
            if step + 1 >= batches:
                break
        return dict(loader.samples_per_dataset())
