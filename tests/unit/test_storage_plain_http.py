"""Plain-HTTP GETs on bare sockets (stoker.storage.plain_http), against a scripted server on
127.0.0.1: bodies by length, by chunks and to the end, kept-alive connections (and one the server
closed meanwhile), bodies cut short, and failures raised as urllib3 raises them (so retried)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
import urllib3.exceptions as ux

from stoker.storage.plain_http import PlainHTTP, PlainResponse
from stoker.storage.retry import is_transient

#: Per connection: (request heads received, the socket) -> None; it answers as the test wants.
Handler = Callable[["Server", socket.socket], None]


class Server:
    """Accepts connections on 127.0.0.1 and runs ``handler`` on each (in its own thread)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self.threads: list[threading.Thread] = []
        self.done = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            self.handler(self, conn)

    def request(self, conn: socket.socket) -> bytes | None:
        """The next request head on ``conn`` (None: the client closed it)."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        self.requests.append(data)
        return data

    def close(self) -> None:
        self.done.set()
        self.listener.close()
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], Server]]:
    servers: list[Server] = []

    def start(handler: Handler) -> Server:
        servers.append(Server(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def ranged(server: Server, conn: socket.socket) -> None:
    """Answers each GET with ``Range: bytes=a-b`` with bytes a..b of 0, 1, 2, ... (mod 256)."""
    while (head := server.request(conn)) is not None:
        line = next(h for h in head.split(b"\r\n") if h.lower().startswith(b"range:"))
        first, last = (int(x) for x in line.split(b"=")[1].split(b"-"))
        body = bytes(i % 256 for i in range(first, last + 1))
        conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\nETag: \"e1\"\r\n\r\n"
                     % len(body) + body)  # fmt: skip


def pattern(first: int, last: int) -> bytes:
    return bytes(i % 256 for i in range(first, last + 1))


def get(http: PlainHTTP, server: Server, headers: dict[str, str] | None = None) -> PlainResponse:
    return http.get("127.0.0.1", server.port, "/b/k?X-Amz-Signature=s", headers or {})


def test_ranged_gets_share_one_kept_connection(serve: Callable[[Handler], Server]) -> None:
    server = serve(ranged)
    http = PlainHTTP(5, 5)
    for first, last in [(0, 99), (1000, 300_000), (5, 5)]:
        response = get(http, server, {"Range": f"bytes={first}-{last}"})
        assert response.status == 206 and response.headers.get("etag") == '"e1"'
        assert response.headers.get("Content-Length") == str(last - first + 1)
        assert response.read(last - first + 1) == pattern(first, last)
        assert response.read(10) == b""  # the end of the body
        response.release_conn()
    assert server.connections == 1
    head = server.requests[0].decode()
    assert head.startswith("GET /b/k?X-Amz-Signature=s HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in head and "Range: bytes=0-99\r\n" in head
    assert "Accept-Encoding: identity\r\n" in head


def test_a_body_read_in_parts_and_one_not_read_whole_is_not_reused(
    serve: Callable[[Handler], Server],
) -> None:
    server = serve(ranged)
    http = PlainHTTP(5, 5)
    response = get(http, server, {"Range": "bytes=0-999"})
    assert response.read(10) + response.read(None) == pattern(0, 999)
    response.release_conn()
    response = get(http, server, {"Range": "bytes=0-999"})
    assert response.read(10) == pattern(0, 9)
    response.release_conn()  # the rest unread: the connection is closed, not kept
    response = get(http, server, {"Range": "bytes=0-9"})
    assert response.read() == pattern(0, 9)
    assert server.connections == 2


def test_a_connection_the_server_closed_while_idle_is_replaced(
    serve: Callable[[Handler], Server],
) -> None:
    def once(server: Server, conn: socket.socket) -> None:
        server.request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # then closes

    server = serve(once)
    http = PlainHTTP(5, 5)
    for _ in range(3):
        response = get(http, server)
        assert response.read(2) == b"ok"
        response.release_conn()
    assert server.connections == 3


def test_chunks_no_length_no_body_and_connection_close(
    serve: Callable[[Handler], Server],
) -> None:
    answers = [
        b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\n<Code\r\n7;x=1\r\n>NoSuch\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 123\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
    ]

    def scripted(server: Server, conn: socket.socket) -> None:
        while answers and server.request(conn) is not None:
            conn.sendall(answers.pop(0))
            if not answers:
                return
        if server.request(conn) is not None:  # to the end of the connection
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nall of it")

    server = serve(scripted)
    http = PlainHTTP(5, 5)
    response = get(http, server)
    assert response.status == 404 and response.read(65536) == b"<Code>NoSuch"
    response.drain_conn()
    response.release_conn()
    response = get(http, server)
    assert response.status == 304 and response.read(65536) == b""  # no body, whatever it says
    response.release_conn()
    response = get(http, server)
    assert response.read() == b"abc"
    response.release_conn()
    assert server.connections == 1  # kept until the server said close
    response = get(http, server)
    assert response.read(4) + response.read() == b"all of it"
    assert server.connections == 2


def test_a_body_cut_short_ends_early_then_reads_nothing(
    serve: Callable[[Handler], Server],
) -> None:
    def cut(server: Server, conn: socket.socket) -> None:
        server.request(conn)
        conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 1000\r\n\r\n" + b"x" * 400)

    server = serve(cut)
    response = get(PlainHTTP(5, 5), server)
    assert response.read(1000) == b"x" * 400  # the caller resumes after what came
    assert response.read(600) == b""


def test_failures_are_urllib3_s_and_retried(serve: Callable[[Handler], Server]) -> None:
    def silent(server: Server, conn: socket.socket) -> None:
        server.request(conn)
        server.done.wait(5)

    def hangs_up(server: Server, conn: socket.socket) -> None:
        server.request(conn)

    def garbage(server: Server, conn: socket.socket) -> None:
        server.request(conn)
        conn.sendall(b"SPDY/9 what\r\n\r\n")

    http = PlainHTTP(5, 0.2)
    with pytest.raises(ux.ReadTimeoutError, match="Read timed out") as timeout:
        get(http, serve(silent))
    with pytest.raises(ux.ProtocolError, match="Connection aborted") as hung:
        get(http, serve(hangs_up))
    with pytest.raises(ux.ProtocolError) as bad:
        get(http, serve(garbage))
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there
    with pytest.raises(ux.NewConnectionError, match="Failed to establish a new connection") as no:
        http.get("127.0.0.1", port, "/b/k", {})
    for caught in (timeout, hung, bad, no):
        assert is_transient(caught.value)


def test_transport_sends_plain_http_on_sockets() -> None:
    pytest.importorskip("boto3")
    from stoker.storage.config import S3Settings
    from stoker.storage.s3_client import _make_client
    from stoker.storage.s3_get import Transport

    settings = S3Settings(endpoint_url="http://127.0.0.1:9", access_key_id="k",
                          secret_access_key="s")  # fmt: skip
    client = _make_client(settings)
    transport = Transport(client)
    config = client.meta.config  # the client's timeouts (stoker's: 5 s to connect, 30 s read)
    assert (transport._plain.connect_timeout, transport._plain.read_timeout) == (
        config.connect_timeout,
        config.read_timeout,
    )
    with pytest.raises(ux.NewConnectionError):  # port 9 (discard): nothing listens
        transport.get("http://127.0.0.1:9/b/k?X-Amz-Signature=s", {})
