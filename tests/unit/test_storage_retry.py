"""Which failures are retried, the backoff schedule within a budget of time (a fake clock and a
seeded generator), and the one clear error once the budget is spent."""

from __future__ import annotations

import random
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp.client_reqrep import RequestInfo
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from stoker.errors import ConfigError, StorageError
from stoker.storage.config import load_storage_config, parse_storage_config
from stoker.storage.deadline import DeadlineExceeded
from stoker.storage.retry import (
    BadResponse,
    RetryBudget,
    ShortRead,
    attempt_deadline,
    is_transient,
    with_retry,
)
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
        (BadResponse("the answer's Content-Length '100, 100' is not one number"), True),
        (DeadlineExceeded("the request passed its deadline"), True),
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


def test_a_permanent_failure_is_raised_at_once() -> None:
    calls: list[int] = []

    def attempt() -> bytes:
        calls.append(1)
        raise FileNotFoundError("gone")

    with pytest.raises(FileNotFoundError):
        with_retry(attempt, RetryBudget(), what="GET", url="u", sleep=lambda _: None)
    assert calls == [1]


class Clock:
    """A fake monotonic clock: sleeping and each attempt move it on; sleeps are recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


def refused_until(
    clock: Clock, until: float, cost: float = 0.002
) -> tuple[list[float], Callable[[], str]]:
    """An attempt that fails like a refused connection until ``until``, then answers."""
    calls: list[float] = []

    def attempt() -> str:
        calls.append(clock.now)
        clock.now += cost
        if clock.now < until:
            raise ConnectionRefusedError(111, "Connection refused")
        return "ok"

    return calls, attempt


@pytest.mark.parametrize("seed", range(5))
def test_default_budget_retries_for_its_seconds_with_capped_jittered_sleeps(seed: int) -> None:
    clock = Clock()
    calls, attempt = refused_until(clock, until=float("inf"))
    budget = RetryBudget()
    with pytest.raises(StorageError):
        with_retry(attempt, budget, what="GET b/k", url="s3://b/k", sleep=clock.sleep,
                   clock=clock, rng=random.Random(seed))  # fmt: skip
    spent = clock.now - 1000.0
    assert budget.max_seconds <= spent <= budget.max_seconds + 0.01  # time, not attempts, ends it
    assert len(calls) == len(clock.sleeps) + 1 > 20  # far more than 10 attempts in 120 s
    for n, pause in enumerate(clock.sleeps[:-1]):  # the last sleep is cut at the deadline
        assert 0 <= pause <= min(budget.max_delay, budget.base_delay * 2**n)
    capped = clock.sleeps[10:-1]  # 0.1 * 2**10 > 4: every one of these is capped at 4 s
    assert max(capped) <= 4.0 and max(capped) > 3.0 and min(capped) < 1.0  # jitter over [0, 4]


def test_the_schedule_is_the_same_for_the_same_seed() -> None:
    schedules = []
    for _ in range(2):
        clock = Clock()
        _, attempt = refused_until(clock, until=float("inf"))
        with pytest.raises(StorageError):
            with_retry(attempt, RetryBudget(max_seconds=30), what="GET", url="u",
                       sleep=clock.sleep, clock=clock, rng=random.Random(7))  # fmt: skip
        schedules.append(clock.sleeps)
    assert schedules[0] == schedules[1] and len(set(schedules[0])) > 5


@pytest.mark.parametrize("failures", [0, 1, 3, 6, 20])
def test_jitter_spans_zero_to_the_capped_exponential(failures: int) -> None:
    budget = RetryBudget(base_delay=0.1, max_delay=4.0)
    rng = random.Random(failures)
    cap = min(4.0, 0.1 * 2**failures)
    delays = [budget.delay(failures, rng) for _ in range(2000)]
    assert all(0.0 <= d <= cap for d in delays)
    assert min(delays) < 0.05 * cap and max(delays) > 0.95 * cap  # full jitter, not a fixed step


@pytest.mark.parametrize("outage", [8.0, 20.0, 60.0])
def test_the_default_budget_rides_out_an_outage(outage: float) -> None:
    clock = Clock()
    _, attempt = refused_until(clock, until=1000.0 + outage)
    assert with_retry(attempt, RetryBudget(), what="GET", url="u", sleep=clock.sleep,
                      clock=clock, rng=random.Random(1)) == "ok"  # fmt: skip
    # Back within one capped sleep (plus an attempt) of the server's return.
    assert clock.now <= 1000.0 + outage + RetryBudget().max_delay + 0.01


@pytest.mark.parametrize("progressing", [True, False])
def test_progress_renews_the_budget_and_no_progress_does_not(progressing: bool) -> None:
    clock, received = Clock(), [0]

    def attempt() -> str:
        clock.now += 1.0  # a slow read, cut short after some bytes (or none)
        if clock.now < 1030.0:
            received[0] += 1000 if progressing else 0
            raise ShortRead("cut")
        return "ok"

    def run() -> str:
        return with_retry(attempt, RetryBudget(max_seconds=10), what="GET", url="u",
                          sleep=clock.sleep, clock=clock, rng=random.Random(0),
                          progress=lambda: received[0])  # fmt: skip

    if progressing:
        assert run() == "ok"  # 30 s of slow progress, within a 10 s budget
    else:
        with pytest.raises(StorageError):
            run()
        # First failure at 1001, budget to 1011, one last attempt of 1 s.
        assert clock.now <= 1000.0 + 1 + 10 + 1


def test_each_attempt_has_a_deadline_and_one_cut_by_it_renews_nothing() -> None:
    """A server that trickles: every attempt receives bytes until its deadline cuts it. The
    budget is not renewed by those bytes, so the request ends within the budget."""
    clock, received, limits = Clock(), [0], []

    def attempt() -> str:
        limit = attempt_deadline()
        assert limit is not None
        limits.append((clock.now, limit))
        received[0] += int(limit - clock.now)  # a byte a second, until cut
        clock.now = limit
        raise DeadlineExceeded("cut at the deadline")

    with pytest.raises(StorageError, match="DeadlineExceeded"):
        with_retry(attempt, RetryBudget(max_seconds=8), what="GET", url="u",
                   sleep=clock.sleep, clock=clock, rng=random.Random(0),
                   progress=lambda: received[0])  # fmt: skip
    assert attempt_deadline() is None  # only while an attempt runs
    assert limits[0] == (1000.0, 1004.0)  # half the budget for an attempt
    assert len(limits) >= 2  # retried once at least
    assert clock.now <= 1000.0 + 8 + 4  # the budget, and a last attempt of at most half of it


def test_max_attempts_still_bounds_the_attempts() -> None:
    clock = Clock()
    calls, attempt = refused_until(clock, until=float("inf"))
    with pytest.raises(StorageError, match=r"after 3 attempt\(s\)"):
        with_retry(attempt, RetryBudget(max_attempts=3), what="GET", url="u",
                   sleep=clock.sleep, clock=clock, rng=random.Random(0))  # fmt: skip
    assert len(calls) == 3 and len(clock.sleeps) == 2


def test_the_message_says_what_was_tried_for_how_long_and_how_to_wait_longer() -> None:
    clock = Clock()
    received = [0]

    def attempt() -> bytes:
        clock.now += 0.5
        if not received[0]:
            received[0] = 4096  # the first attempt got 4 KiB, then the server went away
            raise ShortRead("received 4096 of 100000 bytes")
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(StorageError) as caught:
        with_retry(attempt, RetryBudget(max_seconds=20), what="GET bkt/ds/a.tar bytes 0-99999",
                   url="s3://bkt/ds/a.tar", sleep=clock.sleep, clock=clock,
                   rng=random.Random(3), progress=lambda: received[0])  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("s3://bkt/ds/a.tar: GET bkt/ds/a.tar bytes 0-99999 failed after ")
    attempts = int(message.split("failed after ")[1].split(" ")[0])
    assert attempts > 5
    # From the first failure to the end of the last attempt: the 20 s budget and one attempt.
    assert " over 20.5 s (retry budget max_seconds=20, 4096 bytes received before)" in message
    assert "last error: ConnectionRefusedError: [Errno 111] Connection refused." in message
    assert "retry: {max_seconds: N} in the file STOKER_STORAGE_CONFIG names" in message
    assert "STOKER_STORAGE_RETRY_SECONDS=N" in message


SECONDS = "must be a number of seconds"
ATTEMPTS = "retry max_attempts must be a whole number >= 1 (or null: no limit), not"


@pytest.mark.parametrize(
    ("retry", "problem"),
    [
        ({"max_seconds": "2 min"}, f"retry max_seconds {SECONDS} >= 0, not '2 min'."),
        ({"max_seconds": -1}, f"retry max_seconds {SECONDS} >= 0, not -1."),
        ({"max_delay": 0}, f"retry max_delay {SECONDS} > 0, not 0."),
        ({"base_delay": float("nan")}, f"retry base_delay {SECONDS} > 0, not nan."),
        ({"max_attempts": 0}, f"{ATTEMPTS} 0."),
        ({"max_attempts": 2.5}, f"{ATTEMPTS} 2.5."),
    ],
)
def test_a_bad_retry_budget_is_a_one_line_config_error(
    retry: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_storage_config({"retry": retry}, "/etc/storage.yaml")
    assert str(caught.value) == f"/etc/storage.yaml: {problem}"
    with pytest.raises(ConfigError) as caught:  # per bucket too
        parse_storage_config({"buckets": {"b1x": {"retry": retry}}}, "/etc/storage.yaml")
    assert str(caught.value) == f"/etc/storage.yaml: {problem}"


def test_the_budget_comes_from_the_config_file_or_one_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STOKER_STORAGE_CONFIG", raising=False)
    monkeypatch.delenv("STOKER_STORAGE_RETRY_SECONDS", raising=False)
    assert load_storage_config().default.retry == RetryBudget(max_seconds=120, max_delay=4)
    monkeypatch.setenv("STOKER_STORAGE_RETRY_SECONDS", "600")
    assert load_storage_config().default.retry.max_seconds == 600
    config = parse_storage_config(
        {"retry": {"max_delay": 2}, "buckets": {"slow-bucket": {"retry": {"max_seconds": 30}}}},
        "storage.yaml",
    )
    assert config.for_bucket("other").retry == RetryBudget(max_seconds=600, max_delay=2)
    assert config.for_bucket("slow-bucket").retry == RetryBudget(max_seconds=30, max_delay=2)
    monkeypatch.setenv("STOKER_STORAGE_RETRY_SECONDS", "ten")
    with pytest.raises(ConfigError) as caught:
        load_storage_config()
    assert str(caught.value).startswith("STOKER_STORAGE_RETRY_SECONDS='ten' is not a number of")
