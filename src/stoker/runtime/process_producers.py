"""Batches made by worker processes (torch ``DataLoader`` workers): started, received in
bundles, rebuilt from what the transport sent (:mod:`stoker.pipeline.transport`), optionally
pinned ahead on a thread, watched for stuck or dead workers, and stopped
(:class:`ProcessProducers`)."""

from __future__ import annotations

import collections
import multiprocessing
import multiprocessing.util
import warnings
import weakref
from typing import TYPE_CHECKING, Any

import torch.utils.data

from stoker.errors import StokerError
from stoker.model.samples import pin_memory
from stoker.pipeline.slot_pool import SlotPool
from stoker.pipeline.transport import Exported, MainTransport
from stoker.runtime.envelope import BATCH, Envelope
from stoker.runtime.held_wire import Receiver
from stoker.runtime.pin_thread import PinThread
from stoker.runtime.streams import Resume
from stoker.runtime.worker_dataset import WorkerDataset
from stoker.runtime.worker_procs import WorkerProcesses, unshare_done_event
from stoker.runtime.worker_watch import POLL, WorkerWatch, forget_worker_pids
from stoker.storage.s3_client import spare_for_children

if TYPE_CHECKING:
    from stoker.runtime.loader import Loader


class ProcessProducers:
    """The loader's worker processes and, per worker, the items received from it."""

    def __init__(self, loader: Loader, resume: Resume) -> None:
        workers = loader.dataset.worker_config.num_workers
        self.queues: dict[int, collections.deque[Envelope]] = collections.defaultdict(
            collections.deque
        )
        self._receiver = Receiver()
        self._pin = loader.pin_memory and torch.cuda.is_available()  # asked once, not per batch
        self._pinner: PinThread[list[Envelope]] | None = None
        self._watch: WorkerWatch | None = None
        # Workers inherit this process's temporary folder (removed when it exits) instead of
        # each making a pymp-* folder for its sockets, which a killed worker leaves behind.
        multiprocessing.util.get_temp_dir()
        context = multiprocessing.get_context(loader.worker_type)  # None: the default method
        if context.get_start_method() == "fork":
            spare_for_children()  # S3 clients the workers take rather than each making one
        self._transport: MainTransport | None = MainTransport(
            context, workers, _slot_pool(context, loader, workers)
        )
        self._workers = WorkerProcesses()
        if loader.watch.timeout is not None:
            skip = frozenset(loader.stuck_samples)
            self._watch = WorkerWatch(context, workers, loader.watch, skip)
        self._timeout = loader.timeout
        self._torch_iter: Any = self._start(loader, resume, context, self._transport)
        self._processes = {p.pid: p for p in self._workers.processes}
        if self._watch is not None:
            self._watch.start_monitor()
        if self._watch is not None and loader.watch.on_worker_failure == "replace":
            forget_worker_pids(self._torch_iter)
        if self._pin:  # batches are received and pinned ahead, in order, on their own thread
            self._pinner = PinThread(self._receive, _pin_batch, depth=loader.prefetch_factor)

    def _start(self, loader: Loader, resume: Resume, context: Any, transport: MainTransport) -> Any:
        """Start the workers: torch's iterator over their bundles."""
        dataset = WorkerDataset(
            loader.dataset,
            resume,
            transport.queues,
            loader.options,
            loader.cache_pool,
            loader.prefetch_factor,
            transport.pool,
            self._watch,
        )
        with warnings.catch_warnings():
            # torch warns when workers outnumber cores; the user chose num_workers knowingly.
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            torch_loader = torch.utils.data.DataLoader(
                dataset,
                batch_size=None,
                num_workers=loader.dataset.worker_config.num_workers,
                prefetch_factor=loader.prefetch_factor,
                timeout=loader.timeout if self._watch is None else POLL,
                in_order=False,
                multiprocessing_context=context,
            )
            return self._workers.start(lambda: iter(torch_loader))

    def next_from(self, worker: int) -> Envelope:
        """Worker ``worker``'s next item, received (and its batch rebuilt) in its turn."""
        queue = self.queues[worker]
        if self._transport is not None:  # slots freed since the last batch go back first
            self._transport.flush()
        while not queue:
            try:
                items = self._pinner.get() if self._pinner else self._receive()
            except (ConnectionError, EOFError) as e:  # its batch's sender is gone
                raise _worker_died(e) from e
            if items:  # a bundle holds the items of one worker
                self.queues[items[0].worker].extend(items)
        item = queue.popleft()
        if self._transport is not None and not self._pin:
            if isinstance(item.batch, Exported):  # plain data, rebuilt when its turn comes
                item.batch = self._transport.load(item.worker, item.batch)
            self._transport.finish(item.batch)  # float batches sent as uint8
        return item

    def _receive(self) -> list[Envelope]:
        """The next bundle of items, watching the workers while none arrives."""
        if self._watch is None:
            return self._receive_next()
        return self._watch.receive(self._receive_next, self._processes, self._timeout)

    def _receive_next(self) -> list[Envelope]:
        """The next bundle of items from a worker, received (see :meth:`_received`)."""
        return [self._received(item) for item in next(self._torch_iter).items]

    def _received(self, item: Envelope) -> Envelope:
        """The item with its batch rebuilt at once if it refers to what its worker serves
        (file descriptors, slots: the worker may exit soon after, while the item waits here for
        its turn). A batch of plain data is rebuilt when it is handed out (:meth:`next_from`):
        its objects are not made long before they are used (see
        :mod:`stoker.pipeline.batch_pickler`)."""
        if item.kind == BATCH:  # a worker's items arrive in its streams' order
            item.held = self._receiver.expand(item.stream, item.held)
        batch = item.batch
        if isinstance(batch, Exported) and self._transport is not None:
            if batch.detached and not self._pin:
                return item
            item.batch = self._transport.load(item.worker, batch)
            if self._pin:  # pinned next, on this thread: floats sent as uint8 are scaled first
                self._transport.finish(item.batch)
        return item

    def close(self, *, wait: bool = True) -> None:
        """Stop the workers: asked to finish, or (``wait=False``) ended at once."""
        if self._pinner is not None:  # first: it may be reading from the workers
            self._pinner.close(timeout=10.0 if wait else 0.0)
            self._pinner = None
        if self._torch_iter is not None:
            if not wait:  # collected in a cycle: torch's queues may be gone (see worker_procs)
                self._workers.terminate()
                unshare_done_event(self._torch_iter)
            freed = weakref.ref(self._torch_iter)
            self._torch_iter = None  # torch's iterator stops its workers when it is freed
            if wait and freed() is not None:  # still held (by a traceback, say): end them here
                self._workers.terminate(join=1.0)
                unshare_done_event(freed())
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._watch is not None:
            self._watch.close()


def _slot_pool(context: Any, loader: Loader, workers: int) -> SlotPool | None:
    """The batch slots the workers share (see :mod:`stoker.pipeline.slot_pool`): made here
    before the workers fork, so every process maps them without sending anything. None where
    the workers are spawned (they would be sent) or the user fixed a slot budget per worker."""
    if context.get_start_method() != "fork" or loader.options.batch_slots_mb is not None:
        return None
    try:
        return SlotPool.for_loader(context, workers, loader.prefetch_factor)
    except OSError:  # no address space for it (strict overcommit): slots per worker
        return None


def _pin_batch(items: list[Envelope]) -> list[Envelope]:
    """``items`` with their batches copied to pinned memory (on the :class:`PinThread`)."""
    for item in items:
        if item.kind == BATCH:
            item.batch = pin_memory(item.batch)
    return items


def _worker_died(error: BaseException) -> StokerError:
    """A worker ended while the main process read a batch from it (killed, out of memory)."""
    return StokerError(
        f"a dataloader worker exited unexpectedly while sending a batch ({error}).",
        hint="A worker was killed (out of memory? see `dmesg`) or crashed; restart from the "
        "last saved loader state.",
    )


__all__ = ["ProcessProducers"]
