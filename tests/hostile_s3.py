"""A hostile S3-compatible server on 127.0.0.1: right metadata, wrong answers to ranged GETs.

It serves the files under a folder as the objects of one bucket (path-style: ``HEAD``, ``GET``
whole or ranged, ``ListObjectsV2``, ``If-Match``/``If-None-Match``) and misbehaves, in one of the
ways of :data:`MODES`, only on ranged GETs of ``*.tar`` objects (or of those named in ``keys``):
on every one (``bad="all"``) or once per range (``bad="once"``: a retry, or a resume, of a range
answered badly gets a right answer). ``refuse_presigned`` answers
403 to any GET signed in its query, as some gateways and emulators do.

A thread per connection (daemon threads), bounded: every socket has a timeout, a trickle stops
after :data:`TRICKLE_SECONDS`, and the server shuts itself down after ``lifetime`` seconds if the
test did not stop it before. Used as a context manager::

    with HostileS3(folder, "bucket", "neg_chunk_close") as server:
        ...  # server.endpoint, server.ranged (ranged GETs of shards answered so far)
"""

from __future__ import annotations

import hashlib
import re
import socketserver
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

#: Each misbehaviour, as the table of the issue names it.
MODES = {
    "neg_chunk_close": "chunk size -1, then close",
    "trickle": "a body at 1 byte/s",
    "long_chunk_line": "a chunk-size line of 100 KB",
    "wrong_range": "206 with another offset's bytes (wrong Content-Range)",
    "fake_second": "a correct body followed at once by a fake second response",
    "chunked_half": "chunked body cut at half, then close",
    "bad_chunk_size": "chunk size `zz`",
    "short_length": "Content-Length 100 below the body, then close",
    "extra_100": "206 with 100 bytes more than asked",
    "dup_length": "duplicate Content-Length (equal values)",
    "odd_length": "Content-Length: ²",
    "neg_chunk": "chunk size -5",
}
#: The longest a trickled body goes on (a client that gave up is noticed sooner).
TRICKLE_SECONDS = 30.0
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    owner: HostileS3

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: clients that give up on a bad answer reset their connections."""


class HostileS3:
    """The server (see the module docs); ``mode`` None or ``"ok"`` answers every GET right."""

    def __init__(
        self,
        root: Path,
        bucket: str,
        mode: str | None = None,
        *,
        bad: str = "all",
        keys: set[str] | None = None,
        refuse_presigned: bool = False,
        lifetime: float = 600.0,
    ) -> None:
        if mode not in (None, "ok", *MODES):
            raise ValueError(f"mode={mode!r}; one of {sorted(MODES)}")
        self.root, self.bucket, self.mode, self.bad = root, bucket, mode, bad
        self.keys = keys
        self.refuse_presigned = refuse_presigned
        self.lifetime = lifetime
        self.ranged = 0  # ranged GETs of shards answered
        self._spoilt: dict[str, list[tuple[int, int]]] = {}  # ranges answered badly, per key
        self.refused = 0  # presigned GETs refused
        self._lock = threading.Lock()
        self.stopped = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HostileS3:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        threading.Thread(target=self._expire, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self.stopped.is_set():
            self.stopped.set()
            self._server.shutdown()
            self._server.server_close()

    def _expire(self) -> None:
        if not self.stopped.wait(self.lifetime):
            self.stop()

    def misbehaves(self, key: str, first: int, last: int) -> bool:
        """Whether this ranged GET of a shard gets the bad answer (counts it). Under
        ``bad="once"``, only a range that overlaps no range answered badly before does: a retry
        (or a resume after a cut) gets a right answer, whatever other requests run meanwhile."""
        with self._lock:
            self.ranged += 1
            if self.mode in (None, "ok"):
                return False
            if self.bad == "all":
                return True
            spoilt = self._spoilt.setdefault(key, [])
            if any(a <= last and first <= b for a, b in spoilt):
                return False
            spoilt.append((first, last))
            return True


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 10  # no connection waits on a silent client for longer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # -- requests ------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._object(head=True)

    def do_GET(self) -> None:
        self._object(head=False)

    def _object(self, head: bool) -> None:
        owner = self.server.owner
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        bucket, _, key = unquote(url.path).lstrip("/").partition("/")
        if owner.refuse_presigned and {"X-Amz-Signature", "Signature"} & set(query) and not head:
            owner.refused += 1
            self._error(403, "AccessDenied", "presigned URLs are not accepted here")
            return
        if bucket != owner.bucket:
            self._error(404, "NoSuchBucket", bucket, head)
            return
        if not key:
            self._list(query)
            return
        path = owner.root / key
        if not path.is_file():
            self._error(404, "NoSuchKey", key, head)
            return
        data = path.read_bytes()
        etag = _etag(data)
        if self.headers.get("If-Match") not in (None, etag):
            self._error(412, "PreconditionFailed", key, head)
            return
        if self.headers.get("If-None-Match") == etag:
            self._send(304, {"ETag": etag}, b"", head=True)
            return
        headers = {
            "ETag": etag,
            "Last-Modified": formatdate(path.stat().st_mtime, usegmt=True),
            "Content-Type": "application/octet-stream",
        }
        found = _RANGE.fullmatch(self.headers.get("Range") or "")
        if found is None or head:
            self._send(200, headers, data, head=head)
            return
        first = int(found[1])
        last = min(int(found[2]) if found[2] else len(data) - 1, len(data) - 1)
        if first >= len(data):
            self._error(416, "InvalidRange", key)
            return
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        body = data[first : last + 1]
        shard = key.endswith(".tar") and (
            owner.keys is None or key.rpartition("/")[2] in owner.keys
        )
        if shard and owner.misbehaves(key, first, last):
            _MISBEHAVE[owner.mode or "ok"](self, headers, data, first, last)
            return
        self._send(206, headers, body)

    def _list(self, query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        root = self.server.owner.root
        keys = sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).as_posix().startswith(prefix)
        )
        entries = "".join(
            f"<Contents><Key>{escape(k)}</Key><Size>{(root / k).stat().st_size}</Size>"
            f"<LastModified>2026-01-01T00:00:00.000Z</LastModified></Contents>"
            for k in keys
        )
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult>'
            f"<Name>{self.server.owner.bucket}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(keys)}</KeyCount><IsTruncated>false</IsTruncated>{entries}"
            "</ListBucketResult>"
        ).encode()
        self._send(200, {"Content-Type": "application/xml"}, xml)

    # -- answers -------------------------------------------------------------------------------
    def _send(self, status: int, headers: dict[str, str], body: bytes, head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str, head: bool = False) -> None:
        xml = f"<Error><Code>{code}</Code><Message>{escape(message)}</Message></Error>".encode()
        self._send(status, {"Content-Type": "application/xml"}, xml, head=head)

    def raw(self, head: bytes, body: bytes = b"", close: bool = False) -> None:
        """Write ``head`` (status line, headers, blank line) and ``body`` as they are."""
        self.wfile.write(head + body)
        self.wfile.flush()
        if close:
            self.close_connection = True


def _head(status: int, headers: dict[str, str], *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in headers.items()] + list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunked(headers: dict[str, str]) -> bytes:
    return _head(206, headers, "Transfer-Encoding: chunked")


def _neg_chunk_close(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_chunked(headers), b"-1\r\n" + data[a : b + 1], close=True)


def _trickle(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_head(206, headers, f"Content-Length: {b - a + 1}"))
    end = time.monotonic() + TRICKLE_SECONDS
    for i in range(a, b + 1):
        if time.monotonic() > end or h.server.owner.stopped.wait(1.0):
            break
        try:
            h.raw(b"", data[i : i + 1])
        except OSError:  # the client gave up
            break
    h.close_connection = True


def _long_chunk_line(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    size = f"{b - a + 1:x}".encode()
    line = b"0" * (100_000 - len(size)) + size + b"\r\n"
    h.raw(_chunked(headers), line + data[a : b + 1] + b"\r\n0\r\n\r\n")


def _wrong_range(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    shift = max(1, min(512, len(data) - 1 - b))  # another offset's bytes, or the same shifted
    a2, b2 = (a + shift, b + shift) if b + shift < len(data) else (max(0, a - shift), b - shift)
    headers["Content-Range"] = f"bytes {a2}-{b2}/{len(data)}"
    h.raw(_head(206, headers, f"Content-Length: {b2 - a2 + 1}"), data[a2 : b2 + 1])


def _fake_second(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    body = data[a : b + 1]
    fake = _head(206, headers, f"Content-Length: {len(body)}") + b"F" * len(body)
    h.raw(_head(206, headers, f"Content-Length: {len(body)}"), body + fake)


def _chunked_half(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    half = data[a : a + (b - a + 1) // 2]
    h.raw(_chunked(headers), f"{b - a + 1:x}\r\n".encode() + half, close=True)


def _bad_chunk_size(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_chunked(headers), b"zz\r\n" + data[a : b + 1] + b"\r\n0\r\n\r\n", close=True)


def _short_length(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_head(206, headers, f"Content-Length: {max(0, b - a + 1 - 100)}"), data[a : b + 1], True)


def _extra_100(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    body = data[a : b + 1] + b"E" * 100
    h.raw(_head(206, headers, f"Content-Length: {len(body)}"), body, close=True)


def _dup_length(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    n = b - a + 1
    h.raw(_head(206, headers, f"Content-Length: {n}", f"Content-Length: {n}"), data[a : b + 1])


def _odd_length(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    head = _head(206, headers)[:-2] + "Content-Length: ²".encode() + b"\r\n\r\n"
    h.raw(head, data[a : b + 1], close=True)


def _neg_chunk(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_chunked(headers), b"-5\r\n" + data[a : b + 1] + b"\r\n0\r\n\r\n")


def _ok(h: _Handler, headers: dict[str, str], data: bytes, a: int, b: int) -> None:
    h.raw(_head(206, headers, f"Content-Length: {b - a + 1}"), data[a : b + 1])


_MISBEHAVE = {
    "ok": _ok,
    "neg_chunk_close": _neg_chunk_close,
    "trickle": _trickle,
    "long_chunk_line": _long_chunk_line,
    "wrong_range": _wrong_range,
    "fake_second": _fake_second,
    "chunked_half": _chunked_half,
    "bad_chunk_size": _bad_chunk_size,
    "short_length": _short_length,
    "extra_100": _extra_100,
    "dup_length": _dup_length,
    "odd_length": _odd_length,
    "neg_chunk": _neg_chunk,
}
