"""Wrappers that watch a dataset's items and pass them on: ``LogSampleDataset``,
``GcDataset`` and ``WatchdogDataset`` (Energon's names, stoker's means)."""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

from stoker.errors import StokerError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable, StreamBatches
from stoker.wrappers.base import Out, StreamContext, Wrapper

logger = logging.getLogger("stoker")


def default_get_keys(batch: Any) -> list[str] | None:
    """The ``__key__`` of a sample or batch as a list (None if it has none)."""
    key = batch.get("__key__") if isinstance(batch, dict) else getattr(batch, "__key__", None)
    if key is None:
        return None
    return [str(k) for k in key] if isinstance(key, list | tuple) else [str(key)]


class LogSampleDataset(Wrapper):
    """Logs the keys of every item (logger ``stoker``, level DEBUG) and passes it on.

    Energon writes them to its worker debug files; stoker logs through :mod:`logging`.

    Example:
        >>> from stoker import get_loader
        >>> ds = LogSampleDataset(val_ds, mode="val", worker_config=wc)
        >>> len(list(get_loader(ds)))
        3
    """

    def __init__(
        self,
        dataset: Loadable,
        mode: Literal["train", "val"],
        worker_config: WorkerConfig,
        get_keys_fn: Callable[[Any], list[str] | None] = default_get_keys,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.mode = mode
        self.get_keys_fn = get_keys_fn

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        for step, (item, position, held) in enumerate(items):
            logger.debug("%s sample stream %d #%d: keys %s", self.mode, ctx.stream, step,
                         self.get_keys_fn(item))  # fmt: skip
            yield item, (position, held), [], None


class GcDataset(Wrapper):
    """Runs Python's garbage collector in the worker every ``every_n_iter`` items.

    Energon does this because worker processes that hold references to shared-memory tensors in
    reference cycles exhaust shared memory; stoker's workers build batches in reused shared
    memory slots, so it is rarely needed, but kept for the same effect where users rely on it.
    ``freeze`` moves the objects alive at the start of a dataloader worker out of the collector's
    reach (``gc.freeze``; never in the main process, with ``num_workers=0``).

    Example:
        >>> from stoker import get_loader
        >>> ds = GcDataset(val_ds, worker_config=wc, every_n_iter=10)
        >>> len(list(get_loader(ds)))
        3
    """

    def __init__(
        self,
        dataset: Loadable,
        *,
        worker_config: WorkerConfig,
        every_n_iter: int = 10,
        freeze: bool = True,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.every_n_iter = every_n_iter
        self.freeze = freeze

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        if self.freeze and _in_worker():  # never freeze the training process itself
            gc.collect()
            gc.freeze()
        for step, (item, position, held) in enumerate(items, start=1):
            yield item, (position, held), [], None
            if self.every_n_iter > 0 and step % self.every_n_iter == 0:
                gc.collect()


def _in_worker() -> bool:
    from stoker.pipeline.thread_workers import in_worker_process

    return in_worker_process()  # not a thread worker: that is the training process


class WatchdogDataset(Wrapper):
    """Reports items that take longer than ``timeout_seconds`` to arrive from ``dataset``.

    Energon's watchdog thread prints the stack of a worker stuck past the timeout; stoker
    checks each item's time when it arrives: it logs a warning naming the stream, or raises a
    :class:`~stoker.StokerError` with ``fail_on_timeout``. ``initial_timeout_seconds`` applies to
    a stream's first item (opening shards, first reads).

    Example:
        >>> from stoker import get_loader
        >>> ds = WatchdogDataset(val_ds, worker_config=wc, timeout_seconds=30)
        >>> len(list(get_loader(ds)))
        3
    """

    def __init__(
        self,
        dataset: Loadable,
        worker_config: WorkerConfig,
        timeout_seconds: float | None = 60,
        initial_timeout_seconds: float | None = None,
        fail_on_timeout: bool = False,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        self.timeout_seconds = timeout_seconds
        self.initial_timeout_seconds = initial_timeout_seconds
        self.fail_on_timeout = fail_on_timeout

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        timeout = self.initial_timeout_seconds or self.timeout_seconds
        iterator = iter(items)
        while True:
            began = time.monotonic()
            try:
                item, position, held = next(iterator)
            except StopIteration:
                return
            took = time.monotonic() - began
            if timeout is not None and took > timeout:
                self._late(ctx.stream, took, timeout)
            timeout = self.timeout_seconds
            yield item, (position, held), [], None

    def _watchdog_trigger(self) -> None:
        """Energon's hook for an item past the timeout; the loader's worker watch calls it too
        (with its settings as ``self``): an error under ``fail_on_timeout``, else a warning."""
        message = f"an item took longer than {self.timeout_seconds} s (watchdog)."
        if self.fail_on_timeout:
            raise StokerError(message, hint="Find the slow sample or raise the timeout.")
        logger.warning("watchdog: %s", message)

    def _late(self, stream: int, took: float, timeout: float) -> None:
        message = f"stream {stream} took {took:.1f} s for one item (timeout {timeout} s)."
        if self.fail_on_timeout:
            raise StokerError(
                message, hint="Find the slow sample or storage, or raise the timeout."
            )
        logger.warning("watchdog: %s", message)
