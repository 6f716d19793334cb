"""The keep-alive pool of ranged GETs: TLS as botocore sets it up, reuse only after an exact end.

A real HTTP/1.1 server (the standard library's, over TLS with a certificate made here) on
127.0.0.1 counts the connections it accepts; the hostile answers are in
``tests/integration/test_hostile_s3.py``.
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker.storage.http_pool import Pool

pytest.importorskip("botocore")
x509 = pytest.importorskip("cryptography.x509")

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from stoker.storage.s3_get import tls_context  # noqa: E402

BODY = bytes(range(256)) * 64
LATE = threading.Event()


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stoker test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        first, last = (int(v) for v in self.headers["Range"].removeprefix("bytes=").split("-"))
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {first}-{last}/{len(BODY)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        fake = b""
        if self.path == "/trailing":  # a second answer at once, to a request not yet sent
            fake = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\nXXXXXXXXXX"
        self.wfile.write(BODY[first : last + 1] + fake)
        if self.path == "/late":  # bytes that arrive while the connection is idle in the pool
            self.wfile.flush()
            LATE.wait(10)
            self.wfile.write(
                b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\nYYYYYYYYYY"
            )
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    cert, key = _certificate(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.connections = 0  # type: ignore[attr-defined]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, cert
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _pool(verify: bool | str) -> Pool:
    context = tls_context(verify, None)
    return Pool(connect_timeout=5, read_timeout=5, maxsize=4, ssl_context=context)


def _get(pool: Pool, port: int, path: str, first: int, last: int) -> Any:
    return pool.get("https", "127.0.0.1", port, path, {"Range": f"bytes={first}-{last}"})


def test_tls_with_the_ca_bundle_and_one_connection_for_answers_read_to_their_end(
    https_server: tuple[Any, Path],
) -> None:
    server, cert = https_server
    pool, port = _pool(str(cert)), server.server_address[1]
    for first in (0, 100, 5000):
        answer = _get(pool, port, "/k", first, first + 99)
        assert answer.status == 206 and answer.read(100) == BODY[first : first + 100]
        answer.release_conn()
    assert server.connections == 1


def test_a_certificate_the_bundle_does_not_vouch_for_is_refused(
    https_server: tuple[Any, Path],
) -> None:
    server, _ = https_server
    with pytest.raises(ssl.SSLCertVerificationError):
        _get(_pool(True), server.server_address[1], "/k", 0, 9)  # the default bundle
    answer = _get(_pool(False), server.server_address[1], "/k", 0, 9)  # verification off
    assert answer.read(10) == BODY[:10]
    answer.release_conn()


def test_a_connection_is_reused_only_after_an_exact_end_and_never_answers_early(
    https_server: tuple[Any, Path],
) -> None:
    server, cert = https_server
    pool, port = _pool(str(cert)), server.server_address[1]
    answer = _get(pool, port, "/k", 0, 999)
    assert answer.read(10) == BODY[:10]
    answer.release_conn()  # 990 bytes unread: the connection is closed, not pooled
    answer = _get(pool, port, "/trailing", 0, 9)
    assert server.connections == 2
    assert answer.read(10) == BODY[:10]
    answer.release_conn()  # read to its end, with a fake second answer behind it
    for first in (10, 20):  # the fake one is never read as the answer to the next GET
        answer = _get(pool, port, "/k", first, first + 9)
        assert answer.read(10) == BODY[first : first + 10]
        answer.release_conn()


def test_a_header_given_twice_reads_as_both_values() -> None:
    import email.parser
    import http.client

    from stoker.storage.http_pool import Headers

    message = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
        "Content-Length: 100\r\nContent-Length: 100\r\nETag: x\r\n\r\n"
    )
    headers = Headers(message)  # type: ignore[arg-type]
    assert headers.get("content-length") == "100, 100" and headers["ETag"] == "x"
    assert headers.get("Content-Range") is None and "etag" in headers


def test_an_idle_connection_that_became_readable_is_not_reused(
    https_server: tuple[Any, Path],
) -> None:
    import select

    server, cert = https_server
    pool, port = _pool(str(cert)), server.server_address[1]
    LATE.clear()
    answer = _get(pool, port, "/late", 0, 9)
    assert answer.read(10) == BODY[:10]
    answer.release_conn()
    (idle,) = pool._idle[("https", "127.0.0.1", port)]
    LATE.set()  # the server now sends an answer to nothing
    assert select.select([idle.sock], [], [], 10)[0]
    answer = _get(pool, port, "/k", 10, 19)
    assert answer.read(10) == BODY[10:20]
    answer.release_conn()
    assert server.connections == 2
