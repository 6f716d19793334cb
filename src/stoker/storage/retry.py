"""Retrying remote requests: exponential backoff with full jitter within a budget of time
(:class:`RetryBudget`, two minutes by default), then one clear
:class:`~stoker.errors.TransientStorageError`, whose scope lets the loader's error policy skip.

Only transient failures are retried: connection errors, timeouts, a response cut short,
throttling and 5xx answers. Callers that stream bodies keep what they received between attempts
(the function passed in is called again and resumes at the offset it reached).
"""

from __future__ import annotations

import http.client
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from stoker.errors import ConfigError, TransientStorageError
from stoker.storage.options import STORAGE_RETRY_SECONDS_ENV

#: The environment variable naming the storage config file (see :mod:`stoker.storage.config`).
CONFIG_ENV = "STOKER_STORAGE_CONFIG"

T = TypeVar("T")
#: Transient failures this process retried, over every store (read by the loader's stats).
RETRIED = {"retries": 0}

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
    """A response body ended before the length asked for (the caller resumes)."""


class BadResponse(Exception):
    """An answer whose framing cannot be trusted (malformed ``Content-Length``, chunk sizes, ...):
    transient, since a proxy or a connection may have garbled it; the connection is dropped."""


#: The deadline of the attempt running in this thread (see :func:`attempt_deadline`).
_ATTEMPT = threading.local()
#: The shortest time a last attempt gets, even when it starts at the budget's end.
LAST_ATTEMPT_SECONDS = 10.0


def attempt_deadline() -> float | None:
    """When the attempt :func:`with_retry` is running in this thread must end
    (``time.monotonic()``), connect, head and body together; None outside one.

    An attempt gets half the budget (``max_seconds / 2``), so that one that trickles is retried
    once before the budget ends; a retry gets at most what is left of the budget, but at least
    :data:`LAST_ATTEMPT_SECONDS` (or half the budget, if smaller). A store arms it on
    its socket (:mod:`stoker.storage.deadline`), so a server that trickles is cut, retried
    and reported, never waited for without end.
    """
    deadline: float | None = getattr(_ATTEMPT, "deadline", None)
    return deadline


@dataclass(frozen=True)
class RetryBudget:
    """How long one request keeps trying: a span of time, not a number of attempts.

    After a transient failure the request sleeps a random time in ``[0, min(max_delay,
    base_delay * 2**n)]`` (exponential backoff with full jitter: the n-th failure in a row) and
    tries again, until ``max_seconds`` have passed since its first failure, or since the last
    attempt that received bytes (a read cut short resumes where it stopped, so progress renews
    the budget). The last sleep ends at that deadline and one last attempt follows it. The
    default rides out an outage of two minutes. ``max_attempts`` also bounds the attempts
    (None: only time does).

    Example:
        >>> budget = RetryBudget(max_seconds=600)  # wait up to 10 minutes for the store
        >>> 0.0 <= budget.delay(3, random.Random(0)) <= 0.8
        True
    """

    max_seconds: float = 120.0
    max_delay: float = 4.0
    base_delay: float = 0.1
    max_attempts: int | None = None

    def __post_init__(self) -> None:
        _check_seconds("max_seconds", self.max_seconds, zero=True)
        _check_seconds("max_delay", self.max_delay)
        _check_seconds("base_delay", self.base_delay)
        attempts = self.max_attempts
        if attempts is not None and (type(attempts) is not int or attempts < 1):
            raise ConfigError(
                f"retry max_attempts must be a whole number >= 1 (or null: no limit), not "
                f"{attempts!r}."
            )

    def delay(self, failures: int, rng: random.Random) -> float:
        """The sleep after ``failures + 1`` failures in a row (full jitter, capped)."""
        return rng.uniform(0.0, min(self.max_delay, self.base_delay * (2 ** min(failures, 30))))

    def describe(self) -> str:
        """The budget in the words of its settings, for messages."""
        text = f"max_seconds={self.max_seconds:g}"
        return text + (f", max_attempts={self.max_attempts}" if self.max_attempts else "")


def _check_seconds(name: str, value: object, zero: bool = False) -> None:
    """A one-line :class:`ConfigError` unless ``value`` is a finite number of seconds."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        bound = ">= 0" if zero else "> 0"
        raise ConfigError(f"retry {name} must be a number of seconds {bound}, not {value!r}.")


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
    transient = (ShortRead, BadResponse, http.client.HTTPException, TimeoutError, ConnectionError)
    if isinstance(error, transient):
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
    budget: RetryBudget,
    *,
    what: str,
    url: str,
    progress: Callable[[], int] = lambda: 0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> T:
    """``attempt()``, called again after transient failures until ``budget`` is spent.

    Args:
        attempt: One try; it raises on failure.
        budget: How long to keep trying, and the backoff.
        what: What is being done, for the message (``"GET bucket/key bytes 0-99"``).
        url: The object concerned, for the message.
        progress: Bytes received so far by all attempts; an attempt that adds some renews the
            budget (the next one resumes there), and the message reports them.
        sleep, clock, rng: Injected by tests (a fake clock, a seeded generator).

    Raises:
        TransientStorageError: the budget is spent; it says what was tried, for how long, the last
            error, and how to raise the budget.
        Exception: a permanent failure, at once, as ``attempt`` raised it.
    """
    from stoker.storage.deadline import DeadlineExceeded

    tries = failures = 0  # attempts, and failures since the budget was last renewed
    first_failure: float | None = None
    deadline = 0.0
    received = progress()
    floor = min(budget.max_seconds / 2, LAST_ATTEMPT_SECONDS)
    outer = getattr(_ATTEMPT, "deadline", None)
    while True:
        tries += 1
        started = clock()
        limit = started + budget.max_seconds / 2
        if first_failure is not None:
            limit = min(limit, max(deadline, started + floor))
        _ATTEMPT.deadline = limit
        try:
            return attempt()
        except Exception as e:
            if not is_transient(e):
                raise
            now = clock()
            if isinstance(e, DeadlineExceeded):  # it had its time: no renewal by progress
                if first_failure is None:
                    deadline, first_failure = started + budget.max_seconds, started
                received = progress()
            elif first_failure is None or progress() > received:  # (re)start the budget
                received, failures, deadline = progress(), 0, now + budget.max_seconds
                first_failure = now if first_failure is None else first_failure
            failures += 1
            out_of_attempts = budget.max_attempts is not None and tries >= budget.max_attempts
            if now >= deadline or out_of_attempts:
                elapsed = now - first_failure
                raise _exhausted(e, budget, what, url, tries, elapsed, received) from e
            RETRIED["retries"] += 1
            rng = rng or random.Random()  # made on the first failure: most requests have none
            sleep(min(budget.delay(failures - 1, rng), deadline - now))
        finally:
            _ATTEMPT.deadline = outer


def _exhausted(
    error: Exception,
    budget: RetryBudget,
    what: str,
    url: str,
    tries: int,
    seconds: float,
    received: int,
) -> TransientStorageError:
    """The error that ends a request whose retry budget is spent (its scope lets the loader's
    error policy skip the sample)."""
    got = f", {received} bytes received before" if received else ""
    return TransientStorageError(
        f"{what} failed after {tries} attempt(s) over {seconds:.1f} s (retry budget "
        f"{budget.describe()}{got}); last error: {type(error).__name__}: {error}.",
        path=url,
        hint="Check that the storage endpoint is reachable. To wait longer for it, raise the "
        f"budget: retry: {{max_seconds: N}} in the file {CONFIG_ENV} names, or "
        f"{STORAGE_RETRY_SECONDS_ENV}=N.",
    )
