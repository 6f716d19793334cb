"""``GroupBatchDataset``: batches of items that share a group key."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable
from stoker.wrappers.base import StreamContext
from stoker.wrappers.batch import check_counted_inside
from stoker.wrappers.calls import Failures, function_name
from stoker.wrappers.holding import HoldingWrapper, Numbered, pick


class GroupBatchDataset(HoldingWrapper):
    """Batches of items with the same ``sample_group_key(item) -> (key, batch_size)``.

    Each key has its own bucket; a full bucket becomes ``batcher(items)``. ``fixed_batch_size``
    gives every bucket that size (then the key function returns ``(key, None)``). At the end of
    a finite stream the partial buckets are batched too, unless ``drop_last``. A restore re-reads
    the stream from the oldest item in a bucket (see :mod:`stoker.wrappers.holding`).

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> from stoker import generic_batch
        >>> ds = GroupBatchDataset(samples, fixed_batch_size=2, batcher=generic_batch,
        ...                        sample_group_key=lambda s: (s.caption.split()[-1], None),
        ...                        worker_config=wc)
        >>> all(len({c.split()[-1] for c in batch.caption}) == 1 for batch in get_loader(ds))
        True
    """

    def __init__(
        self,
        dataset: Loadable,
        fixed_batch_size: int | None,
        sample_group_key: Callable[[Any], tuple[Hashable, int | None]],
        batcher: Callable[[list[Any]], Any],
        *,
        batcher_stateless: bool = False,
        batcher_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        drop_last: bool = False,
        failure_tolerance: int = 100,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        check_counted_inside(dataset, type(self).__name__)
        self.fixed_batch_size = fixed_batch_size
        self.sample_group_key = sample_group_key
        self.batcher = batcher
        self.batcher_stateless = batcher_stateless
        self.batcher_config = batcher_config
        self.drop_last = drop_last
        self.failure_tolerance = failure_tolerance

    def describe(self) -> dict[str, Any]:
        return {"fixed_batch_size": self.fixed_batch_size, "batcher": function_name(self.batcher),
                "sample_group_key": function_name(self.sample_group_key),
                "drop_last": self.drop_last}  # fmt: skip

    def _size(self, key: Hashable, size: int | None) -> int:
        if (size is None) == (self.fixed_batch_size is None):
            raise ConfigError(
                f"sample_group_key gave batch size {size} for group {key!r} with "
                f"fixed_batch_size={self.fixed_batch_size}: exactly one of them must be set.",
                hint="Return (key, None) with a fixed_batch_size, else (key, batch_size).",
            )
        chosen = size if size is not None else self.fixed_batch_size
        if not isinstance(chosen, int) or chosen < 1:
            raise ConfigError(f"group {key!r} has batch size {chosen!r}; it must be >= 1.")
        return chosen

    def process(
        self, ctx: StreamContext, items: Iterator[Numbered], held: Any, first: int
    ) -> Iterator[tuple[Any, Any]]:
        name = f"GroupBatchDataset({function_name(self.batcher)})"
        failures = Failures(self.worker_config, name, self.failure_tolerance, skips=ctx.skips)
        buckets: dict[Hashable, tuple[int, list[Numbered]]] = {}

        def add(numbered: Numbered) -> list[Numbered] | None:
            """Put an item in its bucket; the bucket's items if that filled it."""
            key, size = self.sample_group_key(numbered[1])
            size, bucket = buckets.setdefault(key, (self._size(key, size), []))
            bucket.append(numbered)
            if len(bucket) < size:
                return None
            del buckets[key]
            return bucket

        def outputs(bucket: list[Numbered]) -> Iterator[tuple[Any, Any]]:
            for batch in list(failures.run(self.batcher, [item for _, item in bucket])):
                yield batch, sorted(n for _, b in buckets.values() for n, _ in b)

        for numbered in held or []:  # restored in the order they came: same buckets
            add(numbered)
        for numbered in items:
            full = add(numbered)
            if full is not None:
                yield from outputs(full)
        if self.drop_last:
            return
        while buckets:
            _, bucket = buckets.pop(next(iter(buckets)))
            yield from outputs(bucket)

    def held_numbers(self, held: Any) -> list[int]:
        return list(held)

    def with_items(self, held: Any, items: Mapping[int, Any]) -> list[Numbered]:
        return [pick(items, n) for n in held]
