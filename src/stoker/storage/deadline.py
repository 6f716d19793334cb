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

    __slots__ = ("deadline", "done", "fired", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline
        self.fired = self.done = False

    def disarm(self) -> bool:
        """Stop watching (before the connection serves another request); True if it fired."""
        with _LOCK:
            if not self.done:
                self.done = True
                _LIVE[0] -= 1
            return self.fired


_LOCK = threading.Lock()
_WAKE = threading.Condition(_LOCK)
_HEAP: list[tuple[float, int, Watch]] = []
_ORDER = itertools.count()
_THREAD: dict[str, Any] = {"pid": -1}
#: Watches armed and not yet disarmed or fired (the heap also holds disarmed ones until their
#: deadline, or until they outnumber the live ones and the heap is rebuilt without them).
_LIVE = [0]


def arm(sock: socket.socket, deadline: float) -> Watch:
    """Watch ``sock`` until ``deadline`` (``time.monotonic()`` seconds)."""
    watch = Watch(sock, deadline)
    with _LOCK:
        if _THREAD["pid"] != os.getpid():  # first use, or a forked child: no watchdog yet
            _HEAP.clear()
            threading.Thread(target=_watchdog, name="stoker-deadlines", daemon=True).start()
            _THREAD["pid"] = os.getpid()
            _LIVE[0] = 0
        if len(_HEAP) > 64 and len(_HEAP) > 4 * _LIVE[0]:
            _HEAP[:] = [entry for entry in _HEAP if not entry[2].done]
            heapq.heapify(_HEAP)
        _LIVE[0] += 1
        earliest = _HEAP[0][0] if _HEAP else None
        heapq.heappush(_HEAP, (deadline, next(_ORDER), watch))
        if earliest is None or deadline < earliest:
            _WAKE.notify()
    return watch


def arm_response(response: Any, deadline: float | None) -> Watch | None:
    """A :class:`Watch` on the socket of a urllib3 response (None if no deadline or socket)."""
    if deadline is None:
        return None
    connection = getattr(response, "connection", None)
    sock = getattr(connection, "sock", None)
    return arm(sock, deadline) if isinstance(sock, socket.socket) else None


def _watchdog() -> None:
    with _LOCK:
        while True:
            while _HEAP and _HEAP[0][2].done:  # disarmed: forget
                heapq.heappop(_HEAP)
            if not _HEAP:
                _WAKE.wait()
                continue
            left = _HEAP[0][0] - time.monotonic()
            if left > 0:
                _WAKE.wait(left)
                continue
            watch = heapq.heappop(_HEAP)[2]
            watch.fired = watch.done = True
            _LIVE[0] -= 1
            with contextlib.suppress(OSError):  # wakes a blocked recv with end-of-file
                watch.sock.shutdown(socket.SHUT_RDWR)
