"""``EpochizeDataset``: passes (``for`` loops) of ``length`` outputs over a longer dataset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper


class EpochizeDataset(Wrapper):
    """Each ``for`` loop over the loader stops after ``length`` outputs on this rank; the next
    one continues where it stopped (the loader's ``virtual_epoch_length``).

    It counts the loader's outputs, so it must be the outermost wrapper.

    Example:
        >>> from stoker import get_loader
        >>> ds = EpochizeDataset(train_ds, 25, worker_config=wc)
        >>> len(get_loader(ds)), len(list(get_loader(ds)))
        (25, 25)
    """

    def __init__(self, dataset: Loadable, length: int, worker_config: WorkerConfig) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ConfigError(f"EpochizeDataset {length=} must be an integer >= 1.")
        self.length = length

    @property
    def virtual_epoch_length(self) -> int:
        return self.length

    def describe(self) -> dict[str, Any]:
        return {"length": self.length}

    def __len__(self) -> int:
        return self.length

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        for item, position, held in items:
            yield item, (position, held), [], None
