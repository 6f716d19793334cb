"""Which failures are retried, and the one clear error once the budget is spent."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp.client_reqrep import RequestInfo
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from stoker.errors import StorageError
from stoker.storage.retry import RetryPolicy, ShortRead, is_transient, with_retry
from stoker.storage.s3_get import S3HttpError


def response_error(status: int) -> aiohttp.ClientResponseError:
    url = URL("http://127.0.0.1/x")
    info = RequestInfo(url, "GET", CIMultiDictProxy(CIMultiDict()), url)
    return aiohttp.ClientResponseError(info, (), status=status)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (ShortRead("received 3 of 9 bytes"), True),
        (aiohttp.ClientPayloadError("cut"), True),
        (aiohttp.ServerDisconnectedError(), True),
        (response_error(503), True),
        (response_error(429), True),
        (response_error(404), False),
        (response_error(403), False),
        (S3HttpError(503, "SlowDown", "Reduce your request rate."), True),
        (S3HttpError(500, "InternalError", ""), True),
        (S3HttpError(404, "NoSuchKey", "The specified key does not exist."), False),
        (S3HttpError(412, "PreconditionFailed", ""), False),
        (FileNotFoundError("x"), False),
        (PermissionError("x"), False),
        (ValueError("bad"), False),
    ],
)
def test_transient_failures_are_told_apart(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


def test_the_budget_ends_in_one_error_naming_the_url_and_the_budget() -> None:
    calls: list[int] = []
    sleeps: list[float] = []

    def attempt() -> bytes:
        calls.append(1)
        raise aiohttp.ClientPayloadError("cut")

    with pytest.raises(StorageError) as caught:
        with_retry(attempt, RetryPolicy(max_attempts=3), what="GET x", url="http://h/x",
                   sleep=sleeps.append)  # fmt: skip
    assert len(calls) == 3 and len(sleeps) == 2
    message = str(caught.value)
    assert message.startswith("http://h/x: GET x failed after 3 attempt(s)")
    assert "ClientPayloadError" in message and "max_attempts=3" in message


def test_a_permanent_failure_is_raised_at_once() -> None:
    calls: list[int] = []

    def attempt() -> bytes:
        calls.append(1)
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        with_retry(attempt, RetryPolicy(), what="GET", url="u", sleep=lambda _: None)
    assert calls == [1]
