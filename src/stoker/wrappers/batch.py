"""``BatchDataset``: group consecutive items of a dataset into batches."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.batching import restore_key_of, set_restore_key
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper
from stoker.wrappers.calls import Failures, emit, function_name


class BatchDataset(Wrapper):
    """Batches of ``batch_size`` consecutive items of each stream, joined by ``batcher``.

    ``batcher(list_of_items)`` may return a generator (several batches) or raise
    :class:`~stoker.SkipSample`; failures are logged and skipped (at most ``failure_tolerance``
    in a row). The last, smaller batch of a finite stream is kept unless ``drop_last``.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> from stoker import generic_batch
        >>> batches = BatchDataset(samples, batch_size=4, batcher=generic_batch,
        ...                        worker_config=wc)
        >>> [len(batch.caption) for batch in get_loader(batches)]
        [4, 4, 2]
    """

    def __init__(
        self,
        dataset: Loadable,
        batch_size: int,
        batcher: Callable[[list[Any]], Any],
        *,
        batcher_stateless: bool = False,
        batcher_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        drop_last: bool = False,
        failure_tolerance: int = 100,
        worker_config: WorkerConfig,
        error_handler: Any = None,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"{batch_size=} must be an integer >= 1.")
        check_counted_inside(dataset, type(self).__name__)
        self.batch_size = batch_size
        self.batcher = batcher
        self.batcher_stateless = batcher_stateless
        self.batcher_config = batcher_config
        self.drop_last = drop_last
        self.failure_tolerance = failure_tolerance
        self.error_handler = error_handler

    def own_size(self) -> int:
        return 1  # outputs of the current batch's generator already used

    def describe(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "batcher": function_name(self.batcher),
                "drop_last": self.drop_last}  # fmt: skip

    def stream_len(self, stream: int) -> int:
        n = self.dataset.stream_len(stream)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batch(self, items: list[Any]) -> Iterator[Any]:
        """``batcher``'s output(s), each keyed ``("BatchDataset", *the items' restore keys)``
        where it has a ``__restore_key__`` (as Energon keys them, less its batch counter)."""
        key = ("BatchDataset", *(restore_key_of(item) for item in items))
        result = self.batcher(items)
        for batch in result if isinstance(result, Generator) else (result,):
            set_restore_key(batch, key)
            yield batch

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        name = f"BatchDataset({function_name(self.batcher)})"
        failures = Failures(
            self.worker_config, name, self.failure_tolerance, self.error_handler, ctx.skips
        )
        before, after, skip = ctx.start, ctx.start, ctx.own[0]
        pending: list[Any] = []
        for item, position, held in items:
            pending.append(item)
            after = (position, held)
            if len(pending) == self.batch_size:
                for batch, mark, used in emit(failures.run(self._batch, pending), before, after,
                                              skip):  # fmt: skip
                    yield batch, mark, [used], None
                pending, before, skip = [], after, 0
        if pending and not self.drop_last:
            for batch, mark, used in emit(failures.run(self._batch, pending), before, after, skip):
                yield batch, mark, [used], None

    def can_restore_sample(self) -> bool:
        """As in Energon: only with ``batcher_stateless=True`` (and a restorable inner dataset)."""
        return self.batcher_stateless and super().can_restore_sample()

    def restore_sample(self, restore_key: Any) -> Any:
        """``batcher`` on the inner items whose keys ``restore_key`` lists (what ``generic_batch``
        makes of its samples' keys; a leading ``"BatchDataset", index`` is skipped)."""
        keys = list(restore_key)
        if keys and keys[0] == "BatchDataset":
            keys = keys[2:] if len(keys) > 1 and isinstance(keys[1], int) else keys[1:]
        inner = self.dataset.restore_sample  # type: ignore[attr-defined]
        return next(self._batch([inner(k) for k in keys]))


def check_counted_inside(dataset: Loadable, owner: str) -> None:
    """Items are counted by the loader after the outermost wrapper: a limit or virtual epoch
    set inside a wrapper that changes the count would count the wrong things."""
    if dataset.limit is not None or dataset.virtual_epoch_length:
        raise ConfigError(
            f"{owner} wraps a dataset with limit={dataset.limit} / virtual_epoch_length="
            f"{dataset.virtual_epoch_length}, which count the loader's outputs (batches), not the "
            "items this wrapper takes in.",
            hint=f"Make the inner dataset without them and wrap the {owner} in LimitDataset / "
            "EpochizeDataset instead.",
        )
