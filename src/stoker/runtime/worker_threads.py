"""Thread workers (``worker_type="thread"``): each worker's batches made on a thread of the
training process, ``depth`` batches ahead.

A thread runs the very path a worker process runs
(:func:`~stoker.runtime.worker_items.worker_items` over the worker's streams, from the loader's
resume point) and queues its items; the loader takes them per worker in canonical order, as it
takes a process's. Nothing is pickled or copied between processes and nothing of the training
process is duplicated: a batch is built once, in this process's memory. Decoders that release
the GIL (JPEG, PNG, numpy) run side by side; the per-sample Python work of the pipeline does not
(``benchmarks/bench_worker_types.py`` measures both).

On its thread, a worker sees its own ``LoaderOptions`` (:func:`stoker.storage.options.
activate_thread`) and ``torch.utils.data.get_worker_info()`` (:mod:`stoker.pipeline.
thread_workers`); an exception raised outside the per-item path is re-raised by the loader.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from time import monotonic
from typing import Any

from stoker.errors import StokerError
from stoker.model.samples import pin_memory
from stoker.pipeline.thread_workers import as_worker
from stoker.runtime.envelope import BATCH, Envelope
from stoker.runtime.streams import Loadable, Resume
from stoker.storage.options import LoaderOptions, activate_thread

#: How often a waiting side looks whether the other has stopped (seconds).
_POLL = 0.1
#: What a thread queues after its last item.
_DONE = object()

Items = Callable[[Loadable, int, Resume], Iterator[Envelope]]


class _Failed:
    """An exception a worker thread raised outside the per-item path (re-raised by the loader)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class ThreadWorkers:
    """``workers`` threads, thread ``w`` queuing ``items(dataset, w, resume)`` (see module).

    Example:
        >>> def items(dataset, worker, resume):
        ...     yield from (f"item {i} of worker {worker}" for i in range(2))
        >>> workers = ThreadWorkers(val_ds, None, items, workers=2)
        >>> next(workers.producers[1])  # worker 1's next item
        'item 0 of worker 1'
        >>> workers.close()
    """

    def __init__(
        self,
        dataset: Loadable,
        resume: Resume,
        items: Items,
        *,
        workers: int,
        depth: int = 2,
        options: LoaderOptions | None = None,
        pin: bool = False,
        timeout: float = 0.0,
    ) -> None:
        self._stop = threading.Event()
        self._queues: list[queue.Queue[Any]] = [queue.Queue(max(depth, 1)) for _ in range(workers)]
        self._timeout = timeout
        self._pin = pin
        self._threads = [
            threading.Thread(
                target=self._run,
                args=(dataset, resume, items, w, workers, options),
                name=f"stoker-worker-{w}",
                daemon=True,
            )
            for w in range(workers)
        ]
        #: One iterator per worker: its items in the order the worker made them.
        self.producers = [_Producer(self, w) for w in range(workers)]
        for thread in self._threads:
            thread.start()

    def _run(
        self,
        dataset: Loadable,
        resume: Resume,
        items: Items,
        worker: int,
        workers: int,
        options: LoaderOptions | None,
    ) -> None:
        activate_thread(options)
        seed = dataset.worker_config.worker_seed(worker)
        try:
            with as_worker(worker, num_workers=workers, seed=seed, dataset=dataset):
                made = items(dataset, worker, resume)
                try:
                    for item in made:
                        if self._pin and item.kind == BATCH:
                            item.batch = pin_memory(item.batch)  # here, off the training thread
                        if not self._put(worker, item):
                            return
                finally:
                    made.close()  # type: ignore[attr-defined]
            self._put(worker, _DONE)
        except BaseException as e:  # handed to the loader, which re-raises it
            self._put(worker, _Failed(e))
        finally:
            activate_thread(None)

    def _put(self, worker: int, item: Any) -> bool:
        """Queue ``item``, waiting for room until asked to stop; whether it was queued."""
        while not self._stop.is_set():
            try:
                self._queues[worker].put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def take(self, worker: int) -> Envelope:
        """The next item of ``worker`` (waiting for it; ``StopIteration`` after its last)."""
        started = monotonic()
        while True:
            try:
                item = self._queues[worker].get(timeout=_POLL)
                break
            except queue.Empty:
                if not self._threads[worker].is_alive() and self._queues[worker].empty():
                    raise StokerError(
                        f"thread worker {worker} ended without sending its items."
                    ) from None
                if self._timeout and monotonic() - started > self._timeout:
                    raise StokerError(
                        f"thread worker {worker} sent no batch within timeout={self._timeout} s.",
                        hint="Raise get_loader(timeout=...) or look for a sample that hangs.",
                    ) from None
        if item is _DONE:
            raise StopIteration
        if isinstance(item, _Failed):
            raise item.error
        return item  # type: ignore[no-any-return]

    def close(self, timeout: float = 10.0) -> None:
        """Ask the threads to stop after their current batch and wait for them (at most
        ``timeout`` seconds each); queued items are dropped."""
        self._stop.set()
        for q in self._queues:  # a thread waiting for room sees the stop at its next poll
            while True:
                try:
                    q.get_nowait()
                except queue.Empty:
                    break
        deadline = monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - monotonic()))


class _Producer:
    """One worker's items as an iterator (what the loader's in-process producers are)."""

    def __init__(self, workers: ThreadWorkers, worker: int) -> None:
        self._workers, self._worker = workers, worker

    def __iter__(self) -> _Producer:
        return self

    def __next__(self) -> Envelope:
        return self._workers.take(self._worker)

    def close(self) -> None:
        self._workers.close()


__all__ = ["ThreadWorkers"]
