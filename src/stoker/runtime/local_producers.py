"""Batches made in the training process itself: by generators that run when the loader asks
(``num_workers=0``, ``in_process=True``, ``worker_type="main"``) or by thread workers
(``worker_type="thread"``, :mod:`stoker.runtime.worker_threads`). Either way each worker runs
:func:`~stoker.runtime.worker_items.worker_items`, as a worker process does.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from stoker.model.cache_pool import use_cache_pool
from stoker.runtime.envelope import Envelope
from stoker.runtime.streams import Resume
from stoker.runtime.worker_items import metered_items, worker_items
from stoker.runtime.worker_meter import Meter
from stoker.runtime.worker_procs import WORKER_GC_THRESHOLD
from stoker.runtime.worker_threads import ThreadWorkers
from stoker.runtime.worker_types import THREAD
from stoker.runtime.worker_watch import late_items
from stoker.storage.options import LoaderOptions, activate

if TYPE_CHECKING:
    from stoker.runtime.loader import Loader


class LocalProducers:
    """One producer of items per worker, in this process (see the module docs)."""

    def __init__(self, loader: Loader, resume: Resume) -> None:
        dataset, options = loader.dataset, loader.options
        workers = dataset.worker_config.num_workers
        use_cache_pool(loader.cache_pool)
        self.producers: list[Any]
        if workers and loader.worker_type == THREAD and not loader.in_process:
            self.producers = ThreadWorkers(
                dataset,
                resume,
                functools.partial(metered_items, options.stats),
                workers=workers,
                depth=loader.prefetch_factor,
                options=options,
                pin=loader.pin_memory and torch.cuda.is_available(),
                timeout=loader.timeout,
            ).producers
            return
        self.producers = [
            _with_options(worker_items(dataset, w, resume, Meter(enabled=options.stats)), options)
            for w in range(max(workers, 1))
        ]
        if loader.watch.timeout is not None:
            self.producers = [late_items(p, loader.watch) for p in self.producers]

    def next_from(self, worker: int) -> Envelope:
        """Worker ``worker``'s next item."""
        made: Envelope = next(self.producers[worker])
        return made

    def close(self, *, wait: bool = True) -> None:
        """Stop the producers (``wait`` makes no difference here)."""
        for producer in self.producers:
            producer.close()


def _with_options(items: Iterator[Envelope], options: LoaderOptions) -> Iterator[Envelope]:
    """``items`` of an in-process producer, each made under the loader's options (the
    process's own are back in force between batches), with young collections spaced as in a
    worker (:func:`_spaced_collections`)."""
    try:
        while True:
            previous = activate(options)
            thresholds = _spaced_collections()
            try:
                item = next(items, None)
            finally:
                activate(previous)
                if thresholds is not None and gc.get_threshold()[0] == WORKER_GC_THRESHOLD:
                    gc.set_threshold(*thresholds)  # (unless user code set its own meanwhile)
            if item is None:
                return
            yield item
    finally:
        items.close()  # type: ignore[attr-defined]


def _spaced_collections() -> tuple[int, ...] | None:
    """Young collections every :data:`WORKER_GC_THRESHOLD` allocations while this process
    makes a batch itself (``num_workers=0``), as a worker makes them; the thresholds to put
    back after (None: the process's own are as high already).

    A batch of small samples is thousands of objects that live until it is handed out: the
    default threshold (700) walks them several times per batch and moves them to older
    generations, whose collections then walk the whole process (measured: ~1.5 us of ~9 per
    JSONL sample). The process's own thresholds are back in force between batches, so its
    garbage cycles are collected as before, a batch's worth of allocations later at most.
    """
    thresholds = gc.get_threshold()
    if thresholds[0] >= WORKER_GC_THRESHOLD or thresholds[0] == 0:
        return None
    gc.set_threshold(WORKER_GC_THRESHOLD, *thresholds[1:])
    return thresholds


__all__ = ["LocalProducers"]
