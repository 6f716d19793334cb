"""``Blender``: a metadataset in Python instead of YAML."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from stoker.errors import ConfigError
from stoker.pipeline.schedule import BlendSpec
from stoker.plan.weights import BlendWeights, WeightSchedule, parse_weight, weights_at
from stoker.storage.epath import EPath


@dataclass(frozen=True)
class Blender:
    """A weighted blend of datasets, usable wherever a dataset path goes.

    For training the datasets are interleaved by weight (like a metadataset ``blend``); for
    validation they are concatenated. A weight may be a :class:`~stoker.WeightSchedule` (a
    function of the global batch index, like ``weight: {linear: {...}}`` in YAML).

    Example:
        >>> from stoker import get_loader, get_train_dataset
        >>> blend = Blender([("coco-wds", 5), ("coyo-wds", 2)])
        >>> ds = get_train_dataset(blend, worker_config=wc, batch_size=32,
        ...                        shuffle_buffer_size=100, max_samples_per_sequence=100)
        >>> next(iter(get_loader(ds))).image.shape
        torch.Size([32, 3, 48, 64])
        >>> warmup = WeightSchedule.from_points("linear", {0: 100, 1000: 0})
        >>> Blender([("coco-wds", warmup), ("coyo-wds", 100)]).blend_spec().factors
        (0.5, 0.5)
    """

    datasets: Sequence[tuple[str, float | WeightSchedule]]  #: paths may also be Path or EPath

    def __post_init__(self) -> None:
        if not self.datasets:
            raise ConfigError("a Blender needs at least one (path, weight) pair.")
        for item in self.datasets:
            ok = len(item) == 2 and (
                isinstance(item[1], WeightSchedule)
                or (isinstance(item[1], int | float) and item[1] >= 0)
            )
            if not ok:
                raise ConfigError(
                    f"invalid Blender entry {item!r}.",
                    hint="Pass (path, weight) pairs with weights >= 0 or WeightSchedule objects.",
                )
        constant = all(isinstance(w, int | float) for _, w in self.datasets)
        if constant and not any(float(w) > 0 for _, w in self.datasets):  # type: ignore[arg-type]
            raise ConfigError("a Blender needs at least one positive weight.")
        paths = tuple((location(path), weight) for path, weight in self.datasets)
        object.__setattr__(self, "datasets", paths)

    def blend_spec(self) -> BlendSpec:
        """The training blend: the weights (at batch 0) and, if any is one, the schedules."""
        siblings = tuple(parse_weight(w) for _, w in self.datasets)
        at_start = weights_at(siblings, [0])[:, 0]
        total = float(at_start.sum())
        factors = tuple(float(w) / total if total > 0 else 0.0 for w in at_start)
        tree = BlendWeights(tuple(((siblings, d),) for d in range(len(siblings))))
        return BlendSpec("weighted", factors, tree if tree.scheduled else None)


def location(path: str | os.PathLike[str] | EPath) -> str:
    """A path given as ``str``, ``pathlib.Path`` or :class:`~stoker.EPath`, as a string."""
    return path if isinstance(path, str) else str(path)
