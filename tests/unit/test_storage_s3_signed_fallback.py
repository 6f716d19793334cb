"""A server that refuses presigned URLs gets header-signed GETs (botocore's ``get_object``).

Energon's own S3 emulator, and some gateways, accept only signed headers. The presigned path and
its fakes are in test_storage_s3_get.py; a real server's answers in tests/integration.
"""

from __future__ import annotations

from typing import Any

import pytest

from stoker.storage.s3_get import Getter, S3HttpError
from tests.unit.test_storage_s3_get import FakeClient, FakeResponse

REFUSED = b"<Error><Code>AccessDenied</Code><Message>Missing Authorization header</Message></Error>"


class ClientError(Exception):
    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.response = {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


class HeaderSignedClient(FakeClient):
    """Answers ``get_object`` from a dict; records the arguments."""

    def __init__(self, answers: list[FakeResponse], objects: dict[str, bytes]) -> None:
        super().__init__(answers)
        self.objects = objects
        self.calls: list[dict[str, Any]] = []

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if kwargs["Key"] not in self.objects:
            raise ClientError(404, "NoSuchKey")
        return {"Body": FakeResponse(206, self.objects[kwargs["Key"]])}  # a StreamingBody's read


def test_a_refused_presigned_url_switches_to_signed_headers_for_good() -> None:
    refused = FakeResponse(403, REFUSED)
    client = HeaderSignedClient([refused], {"k": b"abc", "j": b"xyz"})
    getter = Getter(client, client.http)
    assert getter.get("b", "k", {"Range": "bytes=0-2", "If-Match": '"e"'}).read() == b"abc"
    assert refused.released
    assert client.calls == [{"Bucket": "b", "Key": "k", "Range": "bytes=0-2", "IfMatch": '"e"'}]
    assert getter.get("b", "j", {"If-None-Match": '"v"'}).read() == b"xyz"
    assert client.presigned == 1  # no more presigning once the server refused it
    assert client.calls[1] == {"Bucket": "b", "Key": "j", "IfNoneMatch": '"v"'}
    with pytest.raises(S3HttpError) as caught:
        getter.get("b", "missing", {})
    assert caught.value.status == 404 and caught.value.response["Error"]["Code"] == "NoSuchKey"


def test_a_403_after_presigned_urls_worked_does_not_switch() -> None:
    denied = FakeResponse(403, b"<Error><Code>AccessDenied</Code></Error>")
    client = HeaderSignedClient([FakeResponse(206, b"a"), denied], {"k": b"never"})
    getter = Getter(client, client.http)
    assert getter.get("b", "k", {}).read() == b"a"
    with pytest.raises(S3HttpError) as caught:
        getter.get("b", "k", {})
    assert caught.value.status == 403 and client.calls == []


class InterleavedSession:
    """Presigned GETs that the server refuses; while the first is in flight, another thread's
    GET (``during``) is refused and switches the getter to signed headers."""

    def __init__(self) -> None:
        self.during: Any = None
        self.sent = 0

    def get(self, url: str, headers: dict[str, str]) -> FakeResponse:
        self.sent += 1
        if self.during is not None:
            during, self.during = self.during, None
            during()
        return FakeResponse(403, REFUSED)


def test_a_refusal_that_arrives_after_another_threads_switch_also_switches() -> None:
    # The shard reader's read-ahead threads start presigned GETs together: each refusal must
    # send its GET with signed headers, not only the first one to come back.
    client = HeaderSignedClient([], {"k": b"abc", "j": b"xyz"})
    session = InterleavedSession()
    getter = Getter(client, session)
    other: list[bytes] = []
    session.during = lambda: other.append(getter.get("b", "j", {}).read())
    assert getter.get("b", "k", {}).read() == b"abc"
    assert other == [b"xyz"] and session.sent == 2
    assert [call["Key"] for call in client.calls] == ["j", "k"]
