"""Retrying remote requests: exponential backoff with full jitter, within a budget of attempts
and seconds, then one clear :class:`~stoker.errors.TransientStorageError` (a
:class:`~stoker.errors.StorageError` whose scope lets the loader's error policy skip the sample).

Only transient failures are retried: connection errors, timeouts, a response cut short,
throttling and 5xx answers. Callers that stream bodies keep what they received between attempts
(the function passed in is called again and resumes at the offset it reached).
"""

from __future__ import annotations

import http.client
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from stoker.errors import TransientStorageError

T = TypeVar("T")

#: Error codes of S3 answers that mean "try again later".
RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestTimeTooSkewed",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
    }
)


class ShortRead(Exception):
    """A response body ended before the length it announced (the caller resumes)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying one request."""

    max_attempts: int = 10
    max_seconds: float = 120.0
    base_delay: float = 0.1
    max_delay: float = 5.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2**attempt)]."""
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2 ** min(attempt, 30))))


#: Errors that another attempt cannot fix, even where a broader transient class matches.
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
              FileExistsError, ValueError, NotImplementedError)  # fmt: skip


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is worth another attempt.

    Transient: connection errors, timeouts, bodies cut short, throttling (429, ``SlowDown``) and
    5xx answers, from botocore (S3) and from aiohttp (fsspec's HTTP and cloud filesystems).
    """
    if isinstance(error, _PERMANENT):
        return False
    if isinstance(error, (ShortRead, http.client.IncompleteRead, TimeoutError, ConnectionError)):
        return True
    status = _http_status(error)
    if status is not None:
        return status >= 500 or status in (408, 429)
    return _is_botocore_transient(error) or _is_aiohttp_transient(error)


def _http_status(error: BaseException) -> int | None:
    """The HTTP status an error reports (botocore ``response``, aiohttp ``status``), if any."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        code = str(response.get("Error", {}).get("Code", ""))
        return 503 if code in RETRYABLE_CODES else int(status or 0)
    status = getattr(error, "status", None)
    return status if isinstance(status, int) and 100 <= status < 600 else None


def _is_botocore_transient(error: BaseException) -> bool:
    try:
        import botocore.exceptions as bx  # type: ignore[import-untyped]
        import urllib3.exceptions as ux
    except ImportError:  # pragma: no cover - boto3 is the s3 extra
        return False
    kinds = (bx.ConnectionError, bx.HTTPClientError, bx.IncompleteReadError, ux.HTTPError, OSError)
    return isinstance(error, kinds)


def _is_aiohttp_transient(error: BaseException) -> bool:
    try:
        import aiohttp
    except ImportError:  # pragma: no cover - fsspec's HTTP filesystem needs it
        return False
    return isinstance(error, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError))


def with_retry(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    url: str,
    progress: Callable[[], str] = lambda: "",
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``attempt()``, called again after transient failures until the budget is spent.

    Args:
        attempt: One try; it raises on failure.
        policy: The budget of attempts and seconds and the backoff.
        what: What is being done, for the message (``"GET bytes=0-99"``).
        url: The object concerned, for the message.
        progress: Describes how far the attempts got, for the message (e.g. the offset reached).

    Raises:
        TransientStorageError: the budget is spent (a permanent failure is raised at once).
    """
    rng = random.Random()
    start = clock()
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except Exception as e:
            if not is_transient(e):
                raise
            elapsed = clock() - start
            pause = policy.delay(tries - 1, rng)
            if tries >= policy.max_attempts or elapsed + pause > policy.max_seconds:
                reached = progress()
                raise TransientStorageError(
                    f"{what} failed after {tries} attempt(s) in {elapsed:.1f} s"
                    + (f" ({reached})" if reached else "")
                    + f"; last error: {type(e).__name__}: {e}.",
                    path=url,
                    hint="Check that the storage endpoint is reachable; the retry budget is "
                    f"max_attempts={policy.max_attempts}, max_seconds={policy.max_seconds:g} "
                    "(the 'retry' settings of the file STOKER_STORAGE_CONFIG names).",
                ) from e
            sleep(pause)
