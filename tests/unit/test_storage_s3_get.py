"""Presigned GETs: URLs reused per object, renewed after a 403, re-aimed after a region redirect.

The S3 integration tests run these GETs against a real server; the answers a loopback server
does not give (a redirect to another region, an expired URL) are played here by a fake session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from stoker.storage.s3_get import Getter, S3HttpError


@dataclass
class FakeResponse:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    released: bool = False

    def read(self, amt: int | None = None) -> bytes:
        data, self.body = self.body, b""
        return data

    def drain_conn(self) -> None:
        self.body = b""

    def release_conn(self) -> None:
        self.released = True


class FakeSession:
    """The transport of presigned GETs: answers in turn."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, dict[str, str]]] = []

    def get(self, url: str, headers: dict[str, str]) -> Any:
        self.sent.append((url, dict(headers)))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class FakeClient:
    def __init__(self, answers: list[Any]) -> None:
        self.http = FakeSession(answers)
        self.presigned = 0
        self.heads: list[tuple[str, str]] = []

    def generate_presigned_url(self, method: str, Params: dict[str, str], ExpiresIn: int) -> str:
        self.presigned += 1
        return f"https://s3.example/{Params['Bucket']}/{Params['Key']}?sig={self.presigned}"

    def head_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        self.heads.append((Bucket, Key))
        return {}


def test_one_presigned_url_per_object_and_headers_passed_through() -> None:
    client = FakeClient([FakeResponse(206, b"abc"), FakeResponse(206, b"def")])
    getter = Getter(client, client.http)
    assert getter.get("b", "k", {"Range": "bytes=0-2"}).read() == b"abc"
    assert getter.get("b", "k", {"Range": "bytes=3-5", "If-Match": '"e"'}).read() == b"def"
    session = client.http
    assert client.presigned == 1
    assert session.sent[1] == (
        "https://s3.example/b/k?sig=1",
        {"Range": "bytes=3-5", "If-Match": '"e"'},
    )


def test_a_region_redirect_is_learned_through_botocore_then_retried() -> None:
    moved = FakeResponse(301, b"<Error><Code>PermanentRedirect</Code></Error>")
    client = FakeClient([moved, FakeResponse(206, b"abc")])
    assert Getter(client, client.http).get("b", "k", {"Range": "bytes=0-2"}).read() == b"abc"
    assert client.heads == [("b", "k")] and client.presigned == 2 and moved.released


def test_errors_carry_the_s3_code_and_give_the_connection_back() -> None:
    body = b"<Error><Code>NoSuchKey</Code><Message>The key does not exist.</Message></Error>"
    answer = FakeResponse(404, body)
    client = FakeClient([answer])
    with pytest.raises(S3HttpError) as caught:
        Getter(client, client.http).get("b", "k", {})
    assert caught.value.status == 404 and answer.released
    assert caught.value.response["Error"] == {
        "Code": "NoSuchKey",
        "Message": "The key does not exist.",
    }
    assert str(caught.value) == "HTTP 404 NoSuchKey: The key does not exist."


def test_a_403_on_an_older_url_presigns_again() -> None:
    now = [1000.0]
    expired = FakeResponse(403, b"<Error><Code>AccessDenied</Code></Error>")
    client = FakeClient([FakeResponse(206, b"a"), expired, FakeResponse(206, b"b")])
    getter = Getter(client, client.http, clock=lambda: now[0])
    assert getter.get("b", "k", {}).read() == b"a"
    now[0] += 60  # the credentials the URL was signed with may have expired since
    assert getter.get("b", "k", {}).read() == b"b"
    assert client.presigned == 2 and expired.released


def test_the_http_session_takes_the_tls_and_keepalive_settings_botocore_would(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pytest.importorskip("boto3")
    from stoker.storage.config import S3Settings
    from stoker.storage.s3_client import _make_client, keepalive_for, verify_for

    for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "BOTOCORE_TCP_KEEPALIVE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    settings = S3Settings(endpoint_url="https://s3.example", access_key_id="k",
                          secret_access_key="s")  # fmt: skip
    client = _make_client(settings)
    assert verify_for(client) is True and not keepalive_for(client)
    monkeypatch.setenv("BOTOCORE_TCP_KEEPALIVE", "true")
    assert keepalive_for(_make_client(settings))
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/requests.pem")
    assert verify_for(_make_client(settings)) == "/etc/requests.pem"
    monkeypatch.setenv("AWS_CA_BUNDLE", "/etc/aws.pem")  # botocore's own setting wins
    assert verify_for(_make_client(settings)) == "/etc/aws.pem"


def test_a_connection_error_names_the_object_but_not_the_signature() -> None:
    bx = pytest.importorskip("botocore.exceptions")
    url = "https://s3.example/b/k?sig=1"
    client = FakeClient([bx.EndpointConnectionError(endpoint_url=url)])
    with pytest.raises(bx.EndpointConnectionError) as caught:  # its class: retried as before
        Getter(client, client.http).get("b", "k", {})
    assert "https://s3.example/b/k" in str(caught.value) and "sig" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_url_behind_a_proxy_goes_through_botocore_and_others_straight_to_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("boto3")
    from stoker.storage.config import S3Settings
    from stoker.storage.s3_client import _make_client
    from stoker.storage.s3_get import _PROXIED, Transport

    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    settings = S3Settings(endpoint_url="http://s3.example:8333", access_key_id="k",
                          secret_access_key="s")  # fmt: skip
    url = "http://s3.example:8333/b/k?X-Amz-Signature=x"
    assert Transport(_make_client(settings))._route(url) == (
        "http",
        "s3.example",
        8333,
        "/b/k?X-Amz-Signature=x",
    )
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert Transport(_make_client(settings))._route(url) is _PROXIED
    monkeypatch.setenv("NO_PROXY", "s3.example")  # as botocore: the endpoint bypasses it
    assert Transport(_make_client(settings))._route(url) != _PROXIED
