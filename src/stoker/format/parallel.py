"""Run a function over many shards in worker processes, in order, with bounded memory."""

from __future__ import annotations

import collections
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Tasks handed out per worker ahead of the consumer: enough to keep workers busy, few enough
#: that results waiting for a slow consumer (e.g. sqlite inserts) cannot pile up.
IN_FLIGHT_PER_WORKER = 4
#: Seconds between a worker's checks that the process that started it is still there.
PARENT_CHECK_S = 0.5


def default_workers(num_workers: int | None, tasks: int) -> int:
    """``num_workers`` (default: the CPU count, at most 16), at least 1, at most ``tasks``."""
    workers = num_workers if num_workers is not None else min(16, os.cpu_count() or 1)
    return max(1, min(workers, tasks))


def ordered_map(
    fn: Callable[[T], R], items: Iterable[T], num_workers: int | None, total: int
) -> Iterator[R]:
    """``map(fn, items)`` over forked worker processes, yielding results in input order."""
    workers = default_workers(num_workers, total)
    if workers == 1:
        yield from map(fn, items)
        return
    context = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with context.Pool(workers, initializer=watch_parent, initargs=(os.getpid(),)) as pool:
        pending: collections.deque[Any] = collections.deque()
        queue = iter(items)
        for item in queue:
            pending.append(pool.apply_async(fn, (item,)))
            if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                break
        while pending:
            result: R = pending.popleft().get()
            for item in queue:
                pending.append(pool.apply_async(fn, (item,)))
                break
            yield result


def watch_parent(parent: int) -> None:
    """End this worker soon after ``parent`` is gone (killed with SIGKILL, say), so that no
    worker keeps indexing for a prepare nobody waits for."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="stoker-parent-watch", daemon=True).start()
