"""Energon's result types of ``load_dataset(path).get_datasets(...)``: the datasets of a split
with their blend weights or repetitions, and how they are blended."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class DatasetBlendMode(Enum):
    """How the datasets of a split combine: by sampling weight, by repetitions, or not at all."""

    NONE = "none"
    DATASET_WEIGHT = "dataset_weight"
    SAMPLE_REPETITIONS = "sample_repetitions"


@dataclass
class LoadedDataset:
    """One dataset of a split: its factory, and its weight or repetitions in the blend."""

    dataset: Any
    weight: float | int | None = None
    repetitions: float | int | None = None
    aux: dict[str, Any] | None = None
    #: The packing group (a metadataset's ``group:``; None: the default group), the key of the
    #: per-group ``packing_buffer_size`` / ``shuffle_buffer_size`` dicts.
    group: str | None = None


@dataclass
class LoadedDatasetList:
    """The datasets of a split and their blend mode.

    Example:
        >>> from stoker import load_dataset
        >>> found = load_dataset("mix.yaml").get_datasets(
        ...     training=True, split_part="train", worker_config=wc)
        >>> found.blend_mode, [d.weight for d in found.datasets]
        (<DatasetBlendMode.DATASET_WEIGHT: 'dataset_weight'>, [0.7, 0.3])
    """

    datasets: list[LoadedDataset] = field(default_factory=list)
    blend_mode: DatasetBlendMode = DatasetBlendMode.NONE
