"""``LimitDataset``: at most ``length`` items per pass on this rank."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper


class LimitDataset(Wrapper):
    """At most ``length`` items of ``dataset`` per pass (per ``for`` loop) on this rank.

    As in Energon, the limit is shared out over the rank's streams (virtual workers; Energon
    splits it over dataloader workers), and each pass starts the inner dataset again from its
    start, so every pass of a validation loader sees the same items (``reset_after_epoch`` is
    accepted for that reason and changes nothing).

    Example:
        >>> from stoker import RepeatDataset, get_loader
        >>> forever = RepeatDataset(val_ds, worker_config=wc)
        >>> val = LimitDataset(forever, 5, worker_config=wc)
        >>> [len(batch.caption) for batch in get_loader(val)]
        [4, 4, 2, 4, 4]
    """

    def __init__(
        self,
        dataset: Loadable,
        length: int,
        *,
        reset_after_epoch: bool = False,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if isinstance(length, bool) or not isinstance(length, int) or length < 0:
            raise ConfigError(f"LimitDataset {length=} must be an integer >= 0.")
        self.length = length
        self.reset_after_epoch = reset_after_epoch

    def own_size(self) -> int:
        return 1  # items taken from the stream this pass

    def describe(self) -> dict[str, Any]:
        return {"length": self.length}

    def quota(self, rank_index: int, rank_streams: int) -> int:
        """This stream's share of ``length`` (the first streams take the remainder)."""
        return self.length // rank_streams + (rank_index < self.length % rank_streams)

    def stream_len(self, stream: int) -> int:
        streams = self.topology().rank_streams().tolist()
        inner = self.dataset.stream_len(stream)
        return min(inner, self.quota(streams.index(stream), len(streams)))

    def __len__(self) -> int:
        return min(self.length, len(self.dataset))

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        quota = self.quota(ctx.rank_index, ctx.rank_streams)
        taken = ctx.own[0]
        if taken >= quota:
            return
        for item, position, held in items:
            taken += 1
            yield item, (position, held), [taken], None
            if taken >= quota:
                return
