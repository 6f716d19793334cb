"""A static file server on 127.0.0.1 that answers HTTP Range requests, for stoker's tests.

Python's ``http.server`` ignores ``Range``; this one answers ``bytes=a-b``, ``bytes=a-`` and
``bytes=-n`` with ``206 Partial Content``, sends ``ETag``/``Last-Modified``, keeps connections
alive (HTTP/1.1), lists no folders (404) and takes no writes (405). It runs as its own process
(``python -m tests.httpserver ROOT --port P``), so a test can kill it for real; the test drives
faults and reads its request log through ``/_control/...``:

- ``POST /_control/cut?count=N&after=B``: the next N file bodies stop after B bytes and the
  connection closes (a server dying mid-read);
- ``POST /_control/ranges?on=0``: ignore ``Range`` headers (answer 200 and the whole file), as
  ``python -m http.server`` does; ``on=1`` answers them again;
- ``GET /_control/log``: the requests served so far, as JSON ``[method, path, range]``.
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 1 << 16


class _State:
    """What the control endpoints change: faults to inject, and the log of requests."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.lock = threading.Lock()
        self.cuts: list[int] = []
        self.ranges = True
        self.log: list[tuple[str, str, str]] = []

    def next_cut(self) -> int | None:
        with self.lock:
            return self.cuts.pop(0) if self.cuts else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        if self.path.startswith("/_control/log"):
            self._reply(200, json.dumps(self.server.state.log).encode(), "application/json")
            return
        self._serve(body=True)

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/_control/cut":
            query = {k: int(v[0]) for k, v in parse_qs(url.query).items()}
            with self.server.state.lock:
                self.server.state.cuts += [query.get("after", 0)] * query.get("count", 1)
            self._reply(200, b"ok")
        elif url.path == "/_control/ranges":
            self.server.state.ranges = parse_qs(url.query).get("on", ["1"])[0] == "1"
            self._reply(200, b"ok")
        else:
            self._reply(405, b"read-only")

    do_PUT = do_DELETE = do_POST

    def _reply(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _serve(self, body: bool) -> None:
        state = self.server.state
        rel = unquote(urlsplit(self.path).path).lstrip("/")
        path = os.path.abspath(os.path.join(state.root, rel))
        wanted = self.headers.get("Range", "")
        with state.lock:
            state.log.append((self.command, "/" + rel, wanted))
        if not path.startswith(state.root + os.sep) or not os.path.isfile(path):
            self._reply(404, b"not found")
            return
        st = os.stat(path)
        start, end = 0, st.st_size  # [start, end)
        match = _RANGE.match(wanted) if state.ranges else None
        if match and (match.group(1) or match.group(2)):
            first, last = match.groups()
            if first:
                start, end = int(first), min(st.st_size, int(last) + 1 if last else st.st_size)
            else:
                start = max(0, st.st_size - int(last))
            if start >= st.st_size or start >= end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{st.st_size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{st.st_size}")
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{st.st_mtime_ns:x}-{st.st_size:x}"')
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.end_headers()
        if body:
            self._send_body(path, start, end)

    def _send_body(self, path: str, start: int, end: int) -> None:
        cut = self.server.state.next_cut()
        stop = end if cut is None else min(end, start + cut)
        with open(path, "rb") as f:
            f.seek(start)
            while start < stop:
                chunk = f.read(min(_CHUNK, stop - start))
                self.wfile.write(chunk)
                start += len(chunk)
        if cut is not None:  # die mid-body: the client sees fewer bytes than announced
            self.wfile.flush()
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, root: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.state = _State(root)


def serve(root: str, port: int) -> None:
    """Serve ``root`` on 127.0.0.1:``port`` until SIGTERM."""
    server = _Server(port, root)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"serving {root} on http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()
    server.server_close()


class RangeServer:
    """The server as a child process, with the control calls tests use.

    Example:
        >>> server = RangeServer("/tmp/data").start()  # doctest: +SKIP
        >>> server.url  # doctest: +SKIP
        'http://127.0.0.1:41234'
        >>> server.stop()  # doctest: +SKIP
    """

    def __init__(self, root: str, port: int | None = None) -> None:
        self.root = root
        if port is None:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> RangeServer:
        """Start the server (on the same port as before, after a stop) and wait until it answers."""
        repo = str(Path(__file__).resolve().parent.parent)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.httpserver", self.root, "--port", str(self.port)],
            cwd=repo, stdout=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the HTTP test server exited with {self.proc.returncode}")
            try:
                self.log()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"no HTTP test server on {self.url}") from None
                time.sleep(0.05)

    def cut(self, count: int, after: int) -> None:
        """The next ``count`` file bodies stop after ``after`` bytes, the connection closed."""
        request = urllib.request.Request(
            f"{self.url}/_control/cut?count={count}&after={after}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as r:
            r.read()

    def ranges(self, on: bool) -> None:
        """Answer ``Range`` headers (True) or ignore them, sending whole files (False)."""
        request = urllib.request.Request(f"{self.url}/_control/ranges?on={int(on)}", method="POST")
        with urllib.request.urlopen(request, timeout=5) as r:
            r.read()

    def log(self) -> list[tuple[str, str, str]]:
        """The requests served so far: (method, path, Range header)."""
        with urllib.request.urlopen(f"{self.url}/_control/log", timeout=5) as r:
            return [tuple(entry) for entry in json.loads(r.read())]  # type: ignore[misc]

    def kill9(self) -> None:
        """Kill the server with SIGKILL (a crash); :meth:`start` starts it again."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, grace: float = 5.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    serve(args.root, args.port)


if __name__ == "__main__":
    main()
