"""``FilterDataset``: keep the items of a dataset for which a function is true."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper
from stoker.wrappers.calls import function_name


class FilterDataset(Wrapper):
    """The items of ``dataset`` for which ``filter_fn(item)`` is true (Energon's signature).

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> ds = FilterDataset(samples, filter_fn=lambda s: "circle" in s.caption,
        ...                    worker_config=wc)
        >>> sorted({s.caption.split()[-1] for s in get_loader(ds)})
        ['circle']
    """

    def __init__(
        self,
        dataset: Loadable,
        *,
        filter_fn: Callable[[Any], bool],
        filter_fn_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.filter_fn = filter_fn
        self.filter_fn_config = filter_fn_config

    def describe(self) -> dict[str, Any]:
        return {"filter_fn": function_name(self.filter_fn)}

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        for item, position, held in items:
            if self.filter_fn(item):
                yield item, (position, held), [], None
