"""``RepeatDataset``: pass over a finite dataset again and again (or ``repeats`` times)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper


class RepeatDataset(Wrapper):
    """``dataset`` repeated forever (``repeats=None``) or ``repeats`` times (may be fractional:
    the last repetition stops after that fraction of each stream's items).

    Each stream restarts its inner stream in the next inner pass when it runs out (a stream
    with no items at all ends instead of spinning). ``restart=False`` leaves a finite repeat
    exhausted for the following passes, as in Energon.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> forever = RepeatDataset(get_val_dataset(path, batch_size=4, worker_config=wc),
        ...                         worker_config=wc)
        >>> batches = iter(get_loader(forever))
        >>> [len(next(batches).caption) for _ in range(5)]  # the 10 val samples, again and again
        [4, 4, 2, 4, 4]
    """

    def __init__(
        self,
        dataset: Loadable,
        *,
        repeats: int | float | None = None,
        restart: bool = True,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if repeats is not None and (isinstance(repeats, bool) or not repeats >= 0):
            raise ConfigError(f"RepeatDataset {repeats=} must be None (forever) or >= 0.")
        self.repeats = repeats
        self.restart = restart

    def own_size(self) -> int:
        return 2  # the repetition, items taken in it

    def describe(self) -> dict[str, Any]:
        return {"repeats": self.repeats}

    def inner_epoch(self, own: list[int] | None, epoch: int) -> int:
        repetition = own[0] if own else 0
        if self.repeats is None:
            return epoch + repetition
        return epoch * max(math.ceil(self.repeats), 1) + repetition

    def stream_len(self, stream: int) -> int:
        if self.repeats is None:
            return self.dataset.stream_len(stream)
        return int(self.dataset.stream_len(stream) * self.repeats)

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        repeats = self.repeats
        if repeats is not None and not self.restart and ctx.epoch > 0:
            return  # a finite repeat that does not restart stays exhausted
        repetition, index = ctx.own
        while repeats is None or repetition < repeats:
            stop_after = None
            if repeats is not None and repetition == math.floor(repeats):
                fraction = repeats - math.floor(repeats)
                stop_after = math.floor(self.dataset.stream_len(ctx.stream) * fraction)
                if index >= stop_after:
                    return
            started_empty = index == 0
            for item, position, held in items:
                index += 1
                yield item, (position, held), [repetition, index], None
                if stop_after is not None and index >= stop_after:
                    return
            if started_empty and index == 0:
                return  # no items in this stream at all: repeating would spin forever
            repetition, index = repetition + 1, 0
            if repeats is not None and repetition >= repeats:
                return
            items, _ = ctx.reopen(None, self.inner_epoch([repetition], ctx.epoch))
