"""``MapDataset``: apply a function to every sample (or batch) of a dataset, in the workers."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper
from stoker.wrappers.calls import Failures, emit, function_name


class MapDataset(Wrapper):
    """``map_fn`` applied to every item of ``dataset`` (Energon's signature).

    ``map_fn`` may return one item, or a generator of any number of items; raising
    :class:`~stoker.SkipSample` drops the input. Other failures are logged and skipped (at most
    ``failure_tolerance`` in a row). A restore inside a generator's outputs runs ``map_fn`` on
    that input again and skips the outputs already used, so ``map_fn`` must be deterministic.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> ds = MapDataset(
        ...     get_val_dataset(path, batch_size=None, worker_config=wc),
        ...     lambda sample: sample.caption.upper(),
        ...     worker_config=wc,
        ... )
        >>> next(iter(get_loader(ds)))
        'A RED CIRCLE'
    """

    def __init__(
        self,
        dataset: Loadable,
        map_fn: Callable[[Any], Any],
        *,
        stateless_map_fn: bool = False,
        map_fn_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        failure_tolerance: int = 100,
        worker_config: WorkerConfig,
        error_handler: Any = None,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.map_fn = map_fn
        self.stateless_map_fn = stateless_map_fn
        self.map_fn_config = map_fn_config
        self.failure_tolerance = failure_tolerance
        #: Energon < 7 took a per-wrapper handler; called with (exception, sample) if given.
        self.error_handler = error_handler

    def own_size(self) -> int:
        return 1  # outputs of the current input's generator already used

    def describe(self) -> dict[str, Any]:
        return {"map_fn": function_name(self.map_fn)}

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        name = f"MapDataset({function_name(self.map_fn)})"
        failures = Failures(
            self.worker_config, name, self.failure_tolerance, self.error_handler, ctx.skips
        )
        before, skip = ctx.start, ctx.own[0]
        for item, position, held in items:
            after = (position, held)
            for output, mark, used in emit(failures.run(self.map_fn, item), before, after, skip):
                yield output, mark, [used], None
            before, skip = after, 0

    def can_restore_sample(self) -> bool:
        """As in Energon: only with ``stateless_map_fn=True`` (and a restorable inner dataset)."""
        return self.stateless_map_fn and super().can_restore_sample()

    def restore_sample(self, restore_key: Any) -> Any:
        """``map_fn`` on the inner item with this key (its first output, for a generator).

        Energon prefixes the key with the wrapper's name; stoker's items keep the key their
        ``map_fn`` gives them (usually the inner item's, passed on).
        """
        outputs = self.map_fn(super().restore_sample(restore_key))
        return next(outputs) if isinstance(outputs, Generator) else outputs
