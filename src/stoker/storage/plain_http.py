"""Keep-alive HTTP/1.1 GETs of plain ``http://`` URLs on bare sockets (presigned S3 GETs).

urllib3 spends about 0.4 ms of CPU per request beyond the transfer itself (its pool, timeout
and retry objects, the long presigned target encoded again, ``http.client``'s header parsing
through the ``email`` package): over loopback, about as much as receiving the 1.6 MiB body of a
typical read-ahead request. Here a request is one ``sendall`` and its answer's head is parsed
by hand, on connections kept open per host (at most ``maxsize`` idle ones). Only plain ``http``
goes this way (an S3-compatible store on the machine or inside a cluster); TLS and proxies stay
with urllib3 (:class:`stoker.storage.s3_get.Transport`).

A failure is raised as urllib3 raises it (``NewConnectionError``, ``ConnectTimeoutError``,
``ReadTimeoutError``, ``ProtocolError``), so the retry budget treats and reports it as before;
a body cut short ends early with what arrived (the caller resumes after it).

Example (any HTTP/1.1 server that answers ranged GETs)::

    http = PlainHTTP(connect_timeout=5, read_timeout=30)
    response = http.get("127.0.0.1", 8333, "/bucket/key?X-Amz-...", {"Range": "bytes=0-99"})
    body = response.read(100)
    response.release_conn()
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Sequence
from typing import Any

#: The most bytes of a response head (status line and headers) accepted.
_MAX_HEAD = 1 << 16
#: Statuses whose answers have no body, whatever their headers say.
_NO_BODY = frozenset((204, 304))


class _Where:
    """What urllib3 names in its errors: the host and port (a pool or connection)."""

    def __init__(self, kind: str, host: str, port: int) -> None:
        self.text = f"{kind}(host={host!r}, port={port!r})"

    def __str__(self) -> str:
        return self.text


class Headers(dict[str, str]):
    """Response headers by lower-case name; :meth:`get` takes any case."""

    def get(self, name: str, default: Any = None) -> Any:
        return dict.get(self, name.lower(), default)


class PlainHTTP:
    """GETs of plain HTTP URLs on kept-alive sockets, per host and port."""

    def __init__(
        self,
        connect_timeout: float | None,
        read_timeout: float | None,
        socket_options: Sequence[tuple[int, int, int]] = (),
        maxsize: int = 10,
    ) -> None:
        self.connect_timeout, self.read_timeout = connect_timeout, read_timeout
        self.socket_options = list(socket_options)
        self.maxsize = max(1, maxsize)
        self._lock = threading.Lock()
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._pid = os.getpid()

    def get(self, host: str, port: int, target: str, headers: dict[str, str]) -> PlainResponse:
        """The response (head read, body not) of ``GET target`` on ``host:port``.

        ``host`` is as in the URL (an IPv6 address in brackets); the ``Host`` header is what
        ``http.client`` sends (no port when it is 80), as a presigned URL was signed for.
        """
        name = host if port == 80 else f"{host}:{port}"
        lines = [f"GET {target} HTTP/1.1", f"Host: {name}", "Accept-Encoding: identity"]
        lines += [f"{key}: {value}" for key, value in headers.items()]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        key = (host, port)
        kept = self._idle_connection(key)
        if kept is not None:
            try:
                return PlainResponse(self, kept, key, request, reused=True)
            except _Dropped:
                pass  # the server closed the idle connection: a new one, once
        return PlainResponse(self, self._connect(host, port), key, request, reused=False)

    def _connect(self, host: str, port: int) -> _Connection:
        address = host[1:-1] if host.startswith("[") else host
        try:
            sock = socket.create_connection((address, port), timeout=self.connect_timeout)
        except TimeoutError as e:
            import urllib3.exceptions as ux

            where = _Where("HTTPConnection", host, port)
            raise ux.ConnectTimeoutError(
                where, f"Connection to {host} timed out. (connect timeout={self.connect_timeout})"
            ) from e
        except OSError as e:
            import urllib3.exceptions as ux

            where = _Where("HTTPConnection", host, port)
            raise ux.NewConnectionError(
                where,  # type: ignore[arg-type]
                f"Failed to establish a new connection: {e}",
            ) from e
        for option in self.socket_options:
            sock.setsockopt(*option)
        sock.settimeout(self.read_timeout)
        return _Connection(sock)

    def _idle_connection(self, key: tuple[str, int]) -> _Connection | None:
        """A kept connection to ``key`` the server did not close meanwhile, if any."""
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's connections are not ours
                self._idle, self._pid = {}, os.getpid()
            idle = self._idle.get(key)
            while idle:
                kept = idle.pop()
                try:  # readable while idle: closed by the server (or garbage): not reusable
                    poll = select.poll()
                    poll.register(kept.sock, select.POLLIN)
                    readable = bool(poll.poll(0))
                except (OSError, ValueError):
                    readable = True
                if not readable:
                    return kept
                kept.close()
        return None

    def close(self) -> None:
        """Close the kept connections (those in use close when their answer is read)."""
        lock = getattr(self, "_lock", None)  # (None: made only in part)
        if lock is None:
            return
        with lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for kept in connections:
                kept.close()

    def __del__(self) -> None:
        self.close()

    def _keep(self, key: tuple[str, int], kept: _Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if self._pid == os.getpid() and len(idle) < self.maxsize:
                idle.append(kept)
                return
        kept.close()


class _Connection:
    """A socket and the buffered reader of its answers (bodies are read straight into the
    ``bytes`` returned, as ``http.client`` reads them)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.fp = sock.makefile("rb")

    def close(self) -> None:
        self.fp.close()
        self.sock.close()


class _Dropped(Exception):
    """A kept connection was closed before any byte of the answer came."""


class PlainResponse:
    """An answer: :attr:`status`, :attr:`headers`, and its body read with :meth:`read`."""

    def __init__(
        self,
        http: PlainHTTP,
        connection: _Connection,
        key: tuple[str, int],
        request: bytes,
        reused: bool,
    ) -> None:
        self._http, self._connection, self._key = http, connection, key
        self._fp = connection.fp
        self._chunked = False
        self._chunk_left = 0
        self._closed = False
        lines = self._head(request, reused)
        parts = lines[0].split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            self._fail(f"bad status line {lines[0][:80]!r}")
        self.version = parts[0].decode("latin-1")
        self.status = int(parts[1])
        self.reason = parts[2].strip().decode("latin-1") if len(parts) > 2 else ""
        self.headers = Headers()
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                continue
            lower = name.strip().decode("latin-1").lower()
            text = value.strip().decode("latin-1")
            old = self.headers.get(lower)
            self.headers[lower] = text if old is None else f"{old}, {text}"
        connection_header = (self.headers.get("connection") or "").lower()
        self._reusable = self.version == "HTTP/1.1" and "close" not in connection_header
        length = self.headers.get("content-length")
        encoding = (self.headers.get("transfer-encoding") or "").lower()
        self._left: int | None  # body bytes not read yet (None: until the end or chunks)
        if self.status in _NO_BODY or 100 <= self.status < 200:
            self._left = 0
        elif "chunked" in encoding:
            self._chunked, self._left = True, None
        elif length is not None and length.strip().isdigit():
            self._left = int(length)
        else:  # to the end of the connection
            self._left, self._reusable = None, False

    # -- the head ---------------------------------------------------------------------------
    def _head(self, request: bytes, reused: bool) -> list[bytes]:
        """Send ``request`` and read the answer's head: its lines, without line ends."""
        connection, readline = self._connection, self._fp.readline
        lines: list[bytes] = []
        size = 0
        try:
            connection.sock.sendall(request)
            while True:
                line = readline(_MAX_HEAD + 1)
                if not line:
                    if reused and not lines:
                        connection.close()
                        raise _Dropped()
                    self._fail("Remote end closed connection without response", disconnected=True)
                if line in (b"\r\n", b"\n"):
                    if not lines:  # blank lines before the status line are skipped
                        continue
                    return lines
                size += len(line)
                if size > _MAX_HEAD:
                    self._fail("the answer's head is too long")
                lines.append(line.rstrip(b"\r\n"))
        except TimeoutError as e:
            connection.close()
            raise self._timeout() from e
        except OSError as e:  # reset, broken pipe, ...
            connection.close()
            if reused and not lines:
                raise _Dropped() from e
            import urllib3.exceptions as ux

            raise ux.ProtocolError("Connection aborted.", e) from e

    def _timeout(self) -> Exception:
        import urllib3.exceptions as ux

        host, port = self._key
        where = _Where("HTTPConnectionPool", host, port)
        return ux.ReadTimeoutError(
            where,  # type: ignore[arg-type]
            None,
            f"Read timed out. (read timeout={self._http.read_timeout})",
        )

    def _fail(self, message: str, disconnected: bool = False) -> None:
        import http.client

        import urllib3.exceptions as ux

        self._connection.close()
        self._closed = True
        cause: Exception = (
            http.client.RemoteDisconnected(message)
            if disconnected
            else http.client.BadStatusLine(message)
        )
        raise ux.ProtocolError("Connection aborted.", cause)

    # -- the body ---------------------------------------------------------------------------
    def read(self, amt: int | None = None) -> bytes:
        """Up to ``amt`` bytes of the body (all the rest if None); fewer only at its end or
        where the connection ended early (then b"" after that)."""
        if self._closed:
            return b""
        if self._chunked:
            return self._read_chunked(amt)
        left = self._left
        want = left if amt is None else amt if left is None else min(amt, left)
        data = self._read(want)
        if left is None:
            if want is None or len(data) < want:  # to the end of the connection: ended
                self._finish(reusable=False)
            return data
        self._left = left - len(data)
        if want is not None and len(data) < want:
            self._finish(reusable=False)
        elif self._left == 0:
            self._finish(reusable=self._reusable)
        return data

    def _read(self, n: int | None) -> bytes:
        """``n`` bytes (all to the end if None), fewer where the connection ended."""
        try:
            return self._fp.read(n)
        except TimeoutError as e:
            self._finish(reusable=False)
            raise self._timeout() from e
        except OSError as e:
            import urllib3.exceptions as ux

            self._finish(reusable=False)
            raise ux.ProtocolError(f"Connection broken: {e!r}", e) from e

    def _read_chunked(self, amt: int | None) -> bytes:
        out = bytearray()
        while amt is None or len(out) < amt:
            if self._chunk_left == 0:
                line = self._line()
                try:
                    size = int(line.split(b";", 1)[0].strip() or b"x", 16)
                except ValueError:
                    self._finish(reusable=False)
                    return bytes(out)
                if size == 0:
                    while self._line():  # the trailer, up to its empty line
                        pass
                    self._finish(reusable=self._reusable)
                    return bytes(out)
                self._chunk_left = size
            n = self._chunk_left if amt is None else min(self._chunk_left, amt - len(out))
            data = self._read(n)
            out += data
            self._chunk_left -= len(data)
            if len(data) < n:
                self._finish(reusable=False)
                return bytes(out)
            if self._chunk_left == 0:
                self._read(2)  # the CRLF after a chunk
        return bytes(out)

    def _line(self) -> bytes:
        """One line of the chunk framing, without its line end (b"" at the end)."""
        try:
            return self._fp.readline(_MAX_HEAD).rstrip(b"\r\n")
        except OSError:
            return b""

    def _finish(self, reusable: bool) -> None:
        """The body was read whole (``reusable``: the connection may serve again) or not."""
        if self._closed:
            return
        self._closed = True
        if reusable:
            self._http._keep(self._key, self._connection)
        else:
            self._connection.close()

    # -- as urllib3's response ----------------------------------------------------------------
    def release_conn(self) -> None:
        """Give the connection back if the body was read whole, else close it."""
        if not self._closed:
            self._finish(reusable=self._left == 0 and not self._chunked)

    def drain_conn(self) -> None:
        """Read the rest of the body, so that the connection can serve again."""
        try:
            while not self._closed and self.read(1 << 20):
                pass
        except Exception:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._connection.close()
