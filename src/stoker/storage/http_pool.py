"""Keep-alive HTTP(S) connections for ranged GETs, on the standard library's ``http.client``.

A ranged GET of a reader is one request line and three headers to a host it already talks to;
the answer is a status, a few headers and a body of known length. ``http.client`` parses and
frames that (status line, headers, ``Content-Length`` and chunked bodies); this module adds what
a pool must: connections kept per host and reused only when the last answer was read to its
exact end, a connection found readable while idle (closed by the server, or holding bytes no one
asked for) never reused, connect and read timeouts, the socket options and the TLS context of
the client's settings, and the attempt's deadline (:mod:`stoker.storage.deadline`) armed from
the connect to the last header. It costs about half the CPU per request of a urllib3 pool
(``urlopen`` re-encodes the long presigned URL and builds a response object of its own),
which is most of what a reader spends per request (``benchmarks/bench_s3.py``).

The answer (:class:`Answer`) reads like a urllib3 response where :mod:`stoker.storage.s3_body`
and :mod:`stoker.storage.s3_get` use one: ``status``, ``headers``, ``read``, ``close``,
``release_conn``, ``drain_conn`` and ``connection.sock``.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from stoker.storage.deadline import DeadlineExceeded, arm
from stoker.storage.retry import attempt_deadline

#: Socket options as ``(level, option, value)``.
SocketOption = tuple[int, int, int]
#: The most bytes of an unread body read so that its connection can serve again.
_DRAIN = 1 << 16


class Headers:
    """The headers of an answer: :meth:`get` joins a header given twice as ``"a, b"`` (as
    urllib3 does), so that a ``Content-Length`` sent twice is seen, not its first value."""

    __slots__ = ("_message",)

    def __init__(self, message: http.client.HTTPMessage) -> None:
        self._message = message

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._message.get_all(name)
        if not values:
            return default
        return values[0] if len(values) == 1 else ", ".join(values)

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._message.get(name) is not None


class _Socket:
    """What :func:`stoker.storage.deadline.arm_response` looks for: ``connection.sock``."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


class Answer:
    """One answer, its body not read yet; its connection goes back to the pool only through
    :meth:`release_conn` after the body was read to its end."""

    def __init__(
        self, pool: Pool, key: tuple[str, str, int], conn: Any, raw: Any, sock: socket.socket
    ) -> None:
        self._pool, self._key, self._raw, self._conn = pool, key, raw, conn
        self.connection = _Socket(sock)
        self.status: int = raw.status
        self.headers = Headers(raw.msg)

    def read(self, amt: int | None = None) -> bytes:
        return bytes(self._raw.read(amt))

    def close(self) -> None:
        """Drop the connection (an answer not read to its end, or broken)."""
        conn, self._conn = self._conn, None
        self._raw.close()
        if conn is not None:
            conn.close()

    def drain_conn(self) -> None:
        """Read what is left of a small body (an error's), so that the connection can serve."""
        if self._conn is not None and not self._raw.isclosed():
            try:
                self._raw.read(_DRAIN)
            except (OSError, ValueError, http.client.HTTPException):
                self.close()

    def release_conn(self) -> None:
        """Give the connection back if the body ended exactly and the server keeps it open."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._raw.isclosed() and not self._raw.will_close:
            self._pool.put(self._key, conn)
        else:
            self._raw.close()
            conn.close()


class Pool:
    """Idle keep-alive connections per (scheme, host, port), at most ``maxsize`` each."""

    def __init__(
        self,
        *,
        connect_timeout: float | None,
        read_timeout: float | None,
        maxsize: int,
        socket_options: Sequence[SocketOption] = (),
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._connect_timeout, self._read_timeout = connect_timeout, read_timeout
        self._maxsize = maxsize
        self._options = tuple(socket_options)
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[Any]] = {}
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)

    def get(
        self, scheme: str, host: str, port: int, target: str, headers: dict[str, str]
    ) -> Answer:
        """Send ``GET target`` to the host and return the answer once its headers arrived.

        Raises what ``http.client`` and the socket raise (``OSError``, ``TimeoutError``,
        ``http.client.HTTPException``: transient for :func:`~stoker.storage.retry.is_transient`)
        and :class:`~stoker.storage.deadline.DeadlineExceeded` past the attempt's deadline.
        """
        key = (scheme, host, port)
        conn = self._take(key) or self._connect(key)
        sock = conn.sock  # (an answer that closes the connection takes it from ``conn``)
        deadline = attempt_deadline()
        watch = None if deadline is None else arm(conn.sock, deadline)
        try:
            conn.request("GET", target, headers=headers)
            raw = conn.getresponse()
        except BaseException as e:
            conn.close()
            if watch is not None and watch.disarm():
                raise DeadlineExceeded("the request passed its deadline before its answer") from e
            raise
        if watch is not None and watch.disarm():
            conn.close()
            raise DeadlineExceeded("the request passed its deadline before its answer")
        return Answer(self, key, conn, raw, sock)

    def put(self, key: tuple[str, str, int], conn: Any) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._maxsize:
                idle.append(conn)
                return
        conn.close()

    def _take(self, key: tuple[str, str, int]) -> Any:
        """An idle connection of ``key`` that is still usable, or None."""
        while True:
            with self._lock:
                idle = self._idle.get(key)
                if not idle:
                    return None
                conn = idle.pop()
            if _usable(conn.sock):
                return conn
            conn.close()

    def _connect(self, key: tuple[str, str, int]) -> Any:
        scheme, host, port = key
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(
                host, port, timeout=self._connect_timeout, context=self._ssl
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self._connect_timeout)
        try:
            conn.connect()
            assert conn.sock is not None
            for level, option, value in self._options:
                conn.sock.setsockopt(level, option, value)
            conn.sock.settimeout(self._read_timeout)
        except BaseException:
            conn.close()  # (a failed TLS handshake leaves the plain socket open)
            raise
        return conn


def _close_all(idle: dict[tuple[str, str, int], list[Any]]) -> None:
    """Close the idle connections of a pool that is gone."""
    for conns in idle.values():
        while conns:
            conns.pop().close()


def _usable(sock: socket.socket | None) -> bool:
    """An idle connection's socket has nothing to read: a readable one was closed by the server
    or holds bytes that answer nothing asked (never read as the next answer)."""
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False
