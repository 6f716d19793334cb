"""What each torch dataloader worker process iterates (:class:`WorkerDataset`): the worker's items
(:func:`~stoker.runtime.worker_items.worker_items`), their batches pickled for the main process
(:mod:`stoker.pipeline.transport`) and sent in bundles (:mod:`stoker.runtime.bundle`)."""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter
from typing import Any

import torch.utils.data

from stoker.model.batch_wire import pack as pack_batch
from stoker.model.cache_pool import CachePool, use_cache_pool
from stoker.pipeline.slot_pool import SlotPool
from stoker.pipeline.stage_clock import CLOCK, TRANSPORT
from stoker.pipeline.transport import WorkerTransport
from stoker.pipeline.transport import activate as use_transport
from stoker.runtime.bundle import RING_SHARE, Bundle, Bundler
from stoker.runtime.envelope import BATCH, ERROR, Envelope
from stoker.runtime.float_batches import floats_travel_as_uint8
from stoker.runtime.held_wire import Sender
from stoker.runtime.streams import Loadable, Resume
from stoker.runtime.worker_errors import WorkerFailure
from stoker.runtime.worker_items import worker_items
from stoker.runtime.worker_meter import Meter
from stoker.runtime.worker_procs import tune_collector
from stoker.runtime.worker_watch import WorkerWatch
from stoker.storage.options import LoaderOptions, activate


class WorkerDataset(torch.utils.data.IterableDataset[Bundle[Envelope]]):
    """What each torch dataloader worker iterates (picklable, for spawned workers too)."""

    def __init__(
        self,
        dataset: Loadable,
        resume: Resume,
        releases: list[Any],
        options: LoaderOptions,
        cache_pool: CachePool | None = None,
        prefetch_factor: int = 2,
        slot_pool: SlotPool | None = None,
        watch: WorkerWatch | None = None,
    ) -> None:
        super().__init__()
        self.watch = watch  # the table a stuck or dead worker is noticed by
        self.dataset, self.resume, self.releases = dataset, resume, releases
        self.options, self.cache_pool = options, cache_pool
        self.prefetch_factor = prefetch_factor  # sizes the shared-memory slots
        self.slot_pool = slot_pool  # the workers' shared slots (forked workers only)

    def __iter__(self) -> Iterator[Bundle[Envelope]]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        if info is not None:
            tune_collector()
        activate(self.options)  # this worker's read-ahead, cache and retries: the loader's
        slots_mb, prefetch = self.options.batch_slots_mb, self.prefetch_factor
        transport = WorkerTransport(
            self.releases[worker],
            slots_mb,
            prefetch,
            floats_as_uint8=floats_travel_as_uint8(self.dataset),
            pool=self.slot_pool,
        )
        transport.worker, transport.reports_pool = worker, worker == 0  # pool slots counted once
        use_transport(transport)  # batches are built in the worker's reused shared-memory slots
        use_cache_pool(self.cache_pool)  # what cookers with need_cache get, in this worker
        sender = Sender()
        meter = Meter(enabled=self.options.stats, transport=transport)
        bundler: Bundler[Envelope] = Bundler()
        items = worker_items(self.dataset, worker, self.resume, meter)
        if self.watch is not None:
            self.watch.start_worker(worker)
            items = self.watch.timed(items, worker)
        try:
            for item in items:
                nbytes, ring_bytes, close = 0, 0, False
                if item.kind == BATCH:
                    nbytes, ring_bytes = self._export(item, transport, sender, worker)
                    close = transport.refers_to_slots  # its slots are not held back
                    if ring_bytes and bundler.max_ring_bytes is None:
                        bundler.max_ring_bytes = int(transport.ring.capacity * RING_SHARE)
                close = close or item.kind == ERROR
                due = bundler.add(item, nbytes, close=close, ring_bytes=ring_bytes)
                yield from due
                if due:
                    bundler.resumed()
                if item.kind == ERROR:
                    return
            rest = bundler.take()
            if rest is not None:
                yield rest
        finally:
            use_transport(None)

    @staticmethod
    def _export(
        item: Envelope, transport: WorkerTransport, sender: Sender, worker: int
    ) -> tuple[int, int]:
        """Pickle ``item``'s batch for the main process (in place); the bytes its message
        carries (none where the pickle went into the payload ring) and those in the ring. A
        batch that cannot be pickled turns the item into an ERROR."""
        CLOCK.start(TRANSPORT)
        started = perf_counter()
        try:
            item.held = sender.compact(item.stream, item.held)  # what changed
            exported = transport.export(pack_batch(item.batch))
            item.batch = exported
            span = exported.span
            return len(exported.payload), 0 if span is None else span[1]
        except Exception as e:  # a batch that cannot be pickled, say
            item.kind, item.batch = ERROR, WorkerFailure.capture(e, worker)
            return 0, 0
        finally:
            CLOCK.stop()
            CLOCK.busy += perf_counter() - started


__all__ = ["WorkerDataset"]
