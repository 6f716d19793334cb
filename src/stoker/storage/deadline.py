"""One deadline per remote request: a socket still busy at its request's deadline is shut down.

A socket timeout bounds each ``recv``, not a request: a server that sends a byte a second never
times out. So a GET arms a :class:`Watch` on its connection's socket with the deadline of its
attempt (:func:`stoker.storage.retry.attempt_deadline`); one watchdog thread per process shuts the
socket down at that time, which ends the blocked read at once, and the reader raises
:class:`DeadlineExceeded` (a ``TimeoutError``: transient, retried within the budget). Arming and
disarming cost a dict insert and delete under a lock: no thread, timer or wake-up per request
(waking a thread per request cost the S3 benchmark ~15 % of its samples/s). The watchdog sleeps
until the earliest deadline (at most :data:`IDLE` seconds when none is armed) and is woken only by
a deadline earlier than that: waking it ten times a second cost a loader's dataloader workers
~25 % more CPU per sample on the S3 benchmark (``benchmarks/bench_s3.py``, W=2).

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
import os
import socket
import threading
import time
from typing import Any

#: The longest the watchdog sleeps when no deadline is armed.
IDLE = 1.0


class DeadlineExceeded(TimeoutError):
    """A request was still running at its deadline (its socket was shut down)."""


class Watch:
    """A socket watched until :meth:`disarm`; :attr:`fired` tells whether it was shut down."""

    __slots__ = ("deadline", "dog", "fired", "sock")

    def __init__(self, dog: _Watchdog, sock: socket.socket, deadline: float) -> None:
        self.dog, self.sock, self.deadline = dog, sock, deadline
        self.fired = False

    def disarm(self) -> bool:
        """Stop watching (before the connection serves another request); True if it fired."""
        with self.dog.lock:
            self.dog.live.pop(id(self), None)
            return self.fired


class _Watchdog:
    """The watches of one process, and the thread that shuts their sockets at their deadlines.
    It sleeps until the earliest deadline; arming wakes it only for an earlier one (requests
    arm later deadlines than those before them, so a request costs a dict insert and delete)."""

    def __init__(self) -> None:
        self.lock = threading.Condition(threading.Lock())
        self.live: dict[int, Watch] = {}
        self.wake_at = 0.0
        threading.Thread(target=self._run, name="stoker-deadlines", daemon=True).start()

    def arm(self, sock: socket.socket, deadline: float) -> Watch:
        watch = Watch(self, sock, deadline)
        with self.lock:
            self.live[id(watch)] = watch
            if deadline < self.wake_at:
                self.lock.notify()
        return watch

    def _run(self) -> None:
        with self.lock:
            while True:
                now = time.monotonic()
                late = [w for w in self.live.values() if w.deadline <= now]
                for watch in late:
                    del self.live[id(watch)]
                    watch.fired = True
                    with contextlib.suppress(OSError):  # wakes a blocked recv with end-of-file
                        watch.sock.shutdown(socket.SHUT_RDWR)
                self.wake_at = min((w.deadline for w in self.live.values()), default=now + IDLE)
                self.lock.wait(max(0.0, self.wake_at - now))


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
