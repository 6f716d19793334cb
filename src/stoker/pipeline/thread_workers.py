"""Which loader worker the running thread is, for workers that are threads of the training process.

User code asks ``torch.utils.data.get_worker_info()`` which worker it runs in (to seed, to log,
to check ``num_workers``); torch answers from a per-process global that only its worker
processes set. A thread worker sets its own :class:`~torch.utils.data.WorkerInfo` here, for its
thread only, and :func:`install` makes ``torch.utils.data.get_worker_info`` answer it on that
thread (and torch's own answer everywhere else). stoker's code that must know whether it runs in
a separate *process* (shared-memory batch buffers, per-process thread pools) asks
:func:`in_worker_process` instead.

Example:
    >>> install()
    >>> import torch.utils.data
    >>> torch.utils.data.get_worker_info() is None  # the main thread is no worker
    True
    >>> with as_worker(1, num_workers=2, seed=7):
    ...     torch.utils.data.get_worker_info().id
    1
    >>> in_worker_process()
    False
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch.utils.data
from torch.utils.data._utils import worker as _torch_worker

_LOCAL = threading.local()
#: torch's own ``get_worker_info`` (None until :func:`install`).
_TORCH: list[Callable[[], Any]] = []


def thread_worker_info() -> Any:
    """The worker info of the thread worker running this code, else None."""
    return getattr(_LOCAL, "info", None)


def in_worker_process() -> bool:
    """Whether this code runs in a worker *process* (torch's or stoker's fork/spawn workers)."""
    return _torch_worker._worker_info is not None


def _get_worker_info() -> Any:
    info = getattr(_LOCAL, "info", None)
    return info if info is not None else _torch_worker._worker_info


def install() -> None:
    """Make ``torch.utils.data.get_worker_info`` answer thread workers too (once; idempotent)."""
    if not _TORCH:
        _TORCH.append(torch.utils.data.get_worker_info)
        torch.utils.data.get_worker_info = _get_worker_info


@contextlib.contextmanager
def as_worker(worker: int, *, num_workers: int, seed: int, dataset: Any = None) -> Iterator[None]:
    """Run the block as thread worker ``worker`` of ``num_workers`` (on this thread only)."""
    install()
    previous = getattr(_LOCAL, "info", None)
    _LOCAL.info = _torch_worker.WorkerInfo(
        id=worker, num_workers=num_workers, seed=seed, dataset=dataset
    )
    try:
        yield
    finally:
        _LOCAL.info = previous


__all__ = ["as_worker", "in_worker_process", "install", "thread_worker_info"]
