"""Pinning on its own thread: received batches are copied to pinned memory ahead of the loop.

Copying a batch to page-locked memory takes time on the thread that does it; torch's DataLoader
does it on a background thread, and so does the :class:`~stoker.runtime.loader.Loader`: a
:class:`PinThread` takes the next item from its ``source``, applies ``pin`` to it and queues
it, at most ``depth`` items ahead of the loop. Items leave in the order the source gave them,
so the loader's bookkeeping (which stream's position a batch carries) is the same as without
pinning. An exception from the source or from ``pin`` is raised, with its traceback, by the
:meth:`PinThread.get` that would have returned that item; the thread ends then, or when
:meth:`PinThread.close` asks it to.

Example:
    >>> items = iter(range(3))
    >>> thread = PinThread(lambda: next(items), lambda x: x * 10, depth=2)
    >>> [thread.get(), thread.get(), thread.get()]
    [0, 10, 20]
    >>> thread.get()
    Traceback (most recent call last):
    ...
    StopIteration
    >>> thread.close()  # the thread has ended
    True
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: How often a waiting thread looks whether it was asked to stop (seconds).
_POLL = 0.1


class PinThread(Generic[T]):
    """``pin(source())`` for each item, on a daemon thread, ``depth`` items ahead (see module)."""

    def __init__(
        self,
        source: Callable[[], T],
        pin: Callable[[T], T],
        depth: int = 2,
        name: str = "stoker-pin-memory",
    ) -> None:
        if depth < 1:
            raise ValueError(f"{depth=} must be >= 1 (items pinned ahead of the loop).")
        self._source, self._pin = source, pin
        #: (item, None) or (None, exception); StopIteration marks the end of the source.
        self._ready: queue.Queue[tuple[T | None, BaseException | None]] = queue.Queue(depth)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def get(self) -> T:
        """The next pinned item; the source's or ``pin``'s exception where it failed
        (``StopIteration`` at the end of the source)."""
        if self._ended:
            raise StopIteration
        while True:
            try:
                item, error = self._ready.get(timeout=_POLL)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._ready.empty():
                    self._ended = True
                    raise RuntimeError("the pin-memory thread ended without a result") from None
        if error is not None:
            self._ended = True
            raise error
        return item  # type: ignore[return-value]

    def close(self, timeout: float | None = 10.0) -> bool:
        """Ask the thread to stop and wait for it (at most ``timeout`` seconds: it may be waiting
        on its source); whether it has ended. Items pinned ahead are dropped."""
        self._stop.set()
        self._ended = True
        while True:  # unblock a put, if the thread waits on a full queue
            try:
                self._ready.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                result: tuple[T | None, BaseException | None] = (self._pin(self._source()), None)
            except BaseException as e:  # handed to the loop's thread (StopIteration too)
                self._put((None, e))
                return
            if not self._put(result):
                return
        return

    def _put(self, result: tuple[T | None, BaseException | None]) -> bool:
        """Queue ``result`` unless asked to stop while the queue is full; whether queued."""
        while not self._stop.is_set():
            try:
                self._ready.put(result, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False


__all__ = ["PinThread"]
