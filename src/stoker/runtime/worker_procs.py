"""The loader's worker processes, stopped through public APIs only.

Torch's DataLoader iterator stops its workers itself when it is freed (its ``__del__``): that is
how a :class:`~stoker.runtime.loader.Loader` asks them to finish. Two cases need more, and
:class:`WorkerProcesses` covers them with ``multiprocessing``:

- the loader is collected in a reference cycle: the garbage collector may have finalized the
  iterator's queues already, so a polite stop would wait out torch's 5 s timeout per worker;
- something else still holds the iterator (a traceback, say), so freeing it stops nothing.

Then the workers are terminated (``Process.terminate``: ``SIGTERM``). Torch's workers exit with
status 0 on a ``SIGTERM`` sent by their parent, so torch's ``SIGCHLD`` handler, which reports
workers killed by a signal, stays quiet, while a worker killed by anyone else is still reported
(tests/integration/test_worker_shutdown.py fails if torch changes that). While the interpreter
exits, torch's and ``multiprocessing``'s exit handlers stop the workers and nothing is done here.

One private attribute is touched (:func:`unshare_done_event`): a worker terminated while it held
the lock of torch's shared "workers done" event (its loop takes it to check the event) leaves
that lock taken for good, and the iterator's own stop, which sets the event, would wait forever.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import threading
from collections.abc import Callable, Iterator
from multiprocessing.process import BaseProcess
from typing import TypeVar

T = TypeVar("T")

#: Set by an ``atexit`` handler: the interpreter is exiting (torch's own exit handling then
#: stops the workers; torch keeps the same flag privately).
_exiting = False


def _mark_exiting() -> None:
    global _exiting
    _exiting = True


atexit.register(_mark_exiting)


class WorkerProcesses:
    """The worker processes of one DataLoader iterator (see module)."""

    def __init__(self) -> None:
        self.processes: list[BaseProcess] = []

    def start(self, make: Callable[[], T]) -> T:
        """``make()`` (an iterator that starts worker processes), noting the children it
        started."""
        before = {p.pid for p in multiprocessing.active_children()}
        with _frozen_while_forking():
            made = make()
        self.processes = [p for p in multiprocessing.active_children() if p.pid not in before]
        return made

    def terminate(self, *, join: float = 0.0) -> None:
        """End the workers now (nothing while the interpreter exits); wait up to ``join``
        seconds for each."""
        if _exiting:
            return
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            if join:
                process.join(join)


def unshare_done_event(torch_iter: object) -> None:
    """After its workers were terminated: give torch's DataLoader iterator a "workers done"
    event of this process alone, so that its stop (which sets the event) cannot wait on a lock
    a terminated worker held (see module). Nothing where torch has no such event."""
    if hasattr(torch_iter, "_workers_done_event"):
        torch_iter._workers_done_event = threading.Event()


@contextlib.contextmanager
def _frozen_while_forking() -> Iterator[None]:
    """This process's objects frozen (``gc.freeze``) while the workers fork, thawed after.

    The forked workers inherit them frozen, so the workers' full collections never write to
    them: their pages stay shared with this process instead of being copied into each worker
    (measured: ~38 MB of PSS less at 2 workers once the workers run full collections, as a long
    run does). A freeze the user made is left as it is.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


#: Net allocations between two young collections in a worker (Python's default: 700).
WORKER_GC_THRESHOLD = 10_000


def tune_collector() -> None:
    """The garbage collector of a worker process.

    What the worker inherited from the training process stays alive, so it goes out of the
    collector's reach: a full collection would otherwise walk and copy it all, page by page
    (~0.15 s of CPU in a worker's first second). Young collections run every
    :data:`WORKER_GC_THRESHOLD` allocations: a batch of small samples is thousands of objects
    that live until it is sent, which the default threshold walks many times over (~6 % of a
    JSONL worker's CPU). Objects in reference cycles are freed a little later; ``GcDataset``
    collects every n batches where that matters."""
    gc.freeze()
    gc.set_threshold(WORKER_GC_THRESHOLD, *gc.get_threshold()[1:])


__all__ = ["WORKER_GC_THRESHOLD", "WorkerProcesses", "tune_collector", "unshare_done_event"]
