"""One deadline per remote request: a socket still busy at its request's deadline is shut down.

A socket timeout bounds each ``recv``, not a request: a server that sends a byte a second never
times out. So a GET arms a :class:`Watch` on its connection's socket with the deadline of its
attempt (:func:`stoker.storage.retry.attempt_deadline`); one watchdog thread per process shuts the
socket down at that time, which ends the blocked read at once, and the reader raises
:class:`DeadlineExceeded` (a ``TimeoutError``: transient, retried within the budget). Arming and
disarming cost a heap push and a flag under a lock: no thread or timer per request.

Example:
    >>> import socket
    >>> a, b = socket.socketpair()
    >>> watch = arm(a, time.monotonic() + 0.05)
    >>> a.recv(1)  # b never writes: the watchdog ends the read at the deadline
    b''
    >>> watch.fired
    True
    >>> a.close(); b.close()
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any


class DeadlineExceeded(TimeoutError):
    """A request was still running at its deadline (its socket was shut down)."""


class Watch:
    """A socket watched until :meth:`disarm`; :attr:`fired` tells whether it was shut down."""

    __slots__ = ("deadline", "dog", "done", "fired", "sock")

    def __init__(self, dog: _Watchdog, sock: socket.socket, deadline: float) -> None:
        self.dog, self.sock, self.deadline = dog, sock, deadline
        self.fired = self.done = False

    def disarm(self) -> bool:
        """Stop watching (before the connection serves another request); True if it fired."""
        with self.dog.lock:
            if not self.done:
                self.done = True
                self.dog.live -= 1
            return self.fired


class _Watchdog:
    """The deadlines of one process, and the thread that enforces them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, Watch]] = []
        self.order = itertools.count()
        #: Watches armed and not yet disarmed or fired (the heap also holds disarmed ones until
        #: their deadline, or until they outnumber the live ones and the heap is rebuilt).
        self.live = 0
        threading.Thread(target=self._run, name="stoker-deadlines", daemon=True).start()

    def arm(self, sock: socket.socket, deadline: float) -> Watch:
        watch = Watch(self, sock, deadline)
        with self.lock:
            heap = self.heap
            if len(heap) > 64 and len(heap) > 4 * self.live:
                heap[:] = [entry for entry in heap if not entry[2].done]
                heapq.heapify(heap)
            self.live += 1
            earliest = heap[0][0] if heap else None
            heapq.heappush(heap, (deadline, next(self.order), watch))
            if earliest is None or deadline < earliest:
                self.wake.notify()
        return watch

    def _run(self) -> None:
        heap = self.heap
        with self.lock:
            while True:
                while heap and heap[0][2].done:  # disarmed: forget
                    heapq.heappop(heap)
                if not heap:
                    self.wake.wait()
                    continue
                left = heap[0][0] - time.monotonic()
                if left > 0:
                    self.wake.wait(left)
                    continue
                watch = heapq.heappop(heap)[2]
                watch.fired = watch.done = True
                self.live -= 1
                with contextlib.suppress(OSError):  # wakes a blocked recv with end-of-file
                    watch.sock.shutdown(socket.SHUT_RDWR)


_DOG: list[_Watchdog | None] = [None]
_START = threading.Lock()


def _forget_in_child() -> None:
    """A forked child has no watchdog thread, and its locks may have been held at the fork."""
    global _START
    _DOG[0], _START = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


def arm(sock: socket.socket, deadline: float) -> Watch:
    """Watch ``sock`` until ``deadline`` (``time.monotonic()`` seconds)."""
    dog = _DOG[0]
    if dog is None:
        with _START:
            dog = _DOG[0]
            if dog is None:
                dog = _DOG[0] = _Watchdog()
    return dog.arm(sock, deadline)


def arm_response(response: Any, deadline: float | None) -> Watch | None:
    """A :class:`Watch` on the socket of a urllib3 response (None if no deadline or socket)."""
    if deadline is None:
        return None
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    return arm(sock, deadline) if isinstance(sock, socket.socket) else None
