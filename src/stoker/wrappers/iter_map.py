"""``IterMapDataset``: a function from the iterator of a stream's items to an iterator."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable
from stoker.wrappers.base import Mark, StreamContext
from stoker.wrappers.calls import function_name
from stoker.wrappers.replay import Marked, ReplayWrapper, Step


def _same(length: int) -> int:
    return length


class IterMapDataset(ReplayWrapper):
    """``iter_map_fn(items) -> outputs`` over each stream's items (Energon's signature).

    ``len_map_fn`` maps the inner length to this one's. A restore replays the stream's pass so
    far through ``iter_map_fn`` (see :mod:`stoker.wrappers.replay`), so it must be
    deterministic.

    Example:
        >>> def pairs(items):
        ...     for a, b in zip(items, items):
        ...         yield (a, b)
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> ds = IterMapDataset(samples, pairs, len_map_fn=lambda n: n // 2,
        ...                     worker_config=wc)
        >>> [(a.__key__, b.__key__) for a, b in get_loader(ds)][:2]
        [('000040', '000041'), ('000042', '000043')]
    """

    def __init__(
        self,
        dataset: Loadable,
        iter_map_fn: Callable[[Iterator[Any]], Iterator[Any]],
        *,
        len_map_fn: Callable[[int], int] = _same,
        stateless_iter_fn: bool = False,
        iter_map_fn_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.iter_map_fn = iter_map_fn
        self.len_map_fn = len_map_fn
        self.stateless_iter_fn = stateless_iter_fn
        self.iter_map_fn_config = iter_map_fn_config

    def describe(self) -> dict[str, Any]:
        return {"iter_map_fn": function_name(self.iter_map_fn)}

    def stream_len(self, stream: int) -> int:
        return self.len_map_fn(self.dataset.stream_len(stream))

    def process(self, ctx: StreamContext, items: Iterator[Marked], first: int) -> Iterator[Step]:
        last: list[Mark] = [ctx.start]

        def inputs() -> Iterator[Any]:
            for item, mark in items:
                last[0] = mark
                yield item

        for output in self.iter_map_fn(inputs()):
            yield output, last[0], False
