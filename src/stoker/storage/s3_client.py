"""One boto3 S3 client per process and settings, and the count of requests a process made.

Clients are made lazily: they are not fork-safe (their connection pools), so the cache is keyed
by the process id and a forked worker makes its own. It makes it from the boto3 session its
parent made for the same settings (sessions hold no connections: configuration, event hooks and
the credentials already resolved), which halves the cost of a worker's first request, unless
those credentials refresh themselves (a lock held by a parent's thread at the fork would stay
held in the child). Better still, before the loader forks its workers (:func:`spare_for_children`)
the parent makes one more client for each of its settings, with its GET transport, and never uses
it: each forked worker takes its copy of it (no sockets, no lock held), instead of spending ~20 ms
of its start making one. That holds too for the settings of every S3 store the process opened
(:func:`expect_client`) but never asked anything, as when all of a dataset's metadata came from
the metadata cache: otherwise each worker of each epoch would make its session and client from
nothing (0.1-0.2 s of CPU). botocore's own retries are off (one attempt per call, with connect and
read timeouts): :mod:`stoker.storage.retry` retries instead.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import MissingDependencyError
from stoker.storage.config import S3Settings
from stoker.storage.s3_http import HTTP_OPTIONS, default_verify
from stoker.storage.s3_http import keepalive_for as keepalive_for
from stoker.storage.s3_http import verify_for as verify_for


@dataclass
class RequestStats:
    """Requests made and body bytes received by this process, by operation."""

    requests: Counter[str] = field(default_factory=Counter)
    bytes_received: int = 0

    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def count(self, op: str | None = None, received: int = 0) -> None:
        """Record one request of ``op`` and/or ``received`` body bytes (thread-safe)."""
        with self._lock:
            if op is not None:
                self.requests[op] += 1
            self.bytes_received += received

    def reset(self) -> None:
        self.requests.clear()
        self.bytes_received = 0


STATS = RequestStats()
_CLIENTS: dict[tuple[object, ...], Any] = {}
#: (boto3 session, its botocore session) by settings and chain variables (shared with forked
#: children, see above).
_SESSIONS: dict[tuple[object, ...], tuple[Any, Any]] = {}
#: Clients made for forked children to take (see above), by settings and chain variables, with
#: the process that made them (which never uses them).
_SPARES: dict[tuple[object, ...], tuple[int, Any]] = {}
#: Settings of the S3 stores this process opened, by settings and chain variables: the clients
#: its forked children will need (:func:`expect_client`).
_EXPECTED: dict[tuple[object, ...], S3Settings] = {}
_LOCK = threading.Lock()
#: The AWS chain's variables a client depends on: a change makes a new client.
_CHAIN_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_REGION",
              "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")  # fmt: skip


def client_for(settings: S3Settings) -> Any:
    """The boto3 S3 client of this process for ``settings`` (made on first use)."""
    key = (os.getpid(), *_chain_key(settings))
    client = _CLIENTS.get(key)
    if client is not None:
        return client
    with _LOCK:
        if key not in _CLIENTS:
            for stale in [k for k in _CLIENTS if k[0] != key[0]]:
                del _CLIENTS[stale]  # inherited through fork: never used here
            _CLIENTS[key] = _take_spare(key) or _make_client(settings, key[1:])
        return _CLIENTS[key]


def _chain_key(settings: S3Settings) -> tuple[object, ...]:
    return (settings, *(os.environ.get(name) for name in _CHAIN_ENV))


def expect_client(settings: S3Settings) -> None:
    """Note that this process opened a store with ``settings``: :func:`spare_for_children`
    makes a spare for them even if this process never made a client of its own."""
    _EXPECTED.setdefault(_chain_key(settings), settings)


def _take_spare(key: tuple[object, ...]) -> Any:
    """The client a parent made for its children (for ``key``'s settings), else None."""
    found = _SPARES.get(key[1:])
    if found is None or found[0] == key[0]:
        return None  # (one made here is for this process's children)
    del _SPARES[key[1:]]  # this process's own from now on: its children make or get another
    return found[1]


def spare_for_children() -> None:
    """Before forking workers: an unused client (its GET transport made) for each settings
    this process's clients serve or its S3 stores were opened with, which each child takes as
    its own (see module). Only where a child may use this process's session."""
    pid = os.getpid()
    with _LOCK:
        keys = dict.fromkeys([k[1:] for k in _CLIENTS if k[0] == pid] + list(_EXPECTED))
        for key in keys:
            found = _SPARES.get(key)
            settings = key[0]
            if (found is not None and found[0] == pid) or not isinstance(settings, S3Settings):
                continue
            if not _fork_safe(_session(settings, key)[0], settings):
                continue
            from stoker.storage.s3_get import getter_for

            spare = _make_client(settings, key)
            getter_for(spare)  # (its connection pool: ~2 ms, no connection yet)
            _SPARES[key] = (pid, spare)


_LOADERS: list[Any] = []


def _botocore_loader() -> Any:
    """One botocore data loader per process tree (it caches JSON models; no sockets: fork-safe)."""
    if not _LOADERS:
        import botocore.loaders  # type: ignore[import-untyped]

        _LOADERS.append(botocore.loaders.create_loader())
    return _LOADERS[0]


def _session(settings: S3Settings, key: tuple[object, ...] = ()) -> tuple[Any, Any]:
    """The (boto3, botocore) sessions for ``settings``: the one kept for ``key`` where it may
    serve this process, else a new one (kept for ``key``)."""
    try:
        import boto3  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError.for_module("boto3", "reading s3:// paths") from None
    found = _SESSIONS.get(key) if key else None
    if found is None or not _fork_safe(found[0], settings):
        found = _make_session(boto3, settings)
        if key:
            _SESSIONS[key] = found
    return found


def _make_client(settings: S3Settings, key: tuple[object, ...] = ()) -> Any:
    session, core = _session(settings, key)
    from botocore.config import Config  # type: ignore[import-untyped]

    client = session.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region or session.region_name or "us-east-1",
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        aws_session_token=settings.session_token,
        config=Config(
            s3={"addressing_style": "path" if settings.path_style else "auto"},
            retries={"total_max_attempts": 1},
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            max_pool_connections=32,
            response_checksum_validation="when_required",
            request_checksum_calculation="when_required",
        ),
    )
    HTTP_OPTIONS[client] = (
        default_verify(core.get_config_variable("ca_bundle")),
        bool(core.get_config_variable("tcp_keepalive")),
    )
    return client


def _make_session(boto3: Any, settings: S3Settings) -> tuple[Any, Any]:
    import botocore.session  # type: ignore[import-untyped]

    core = botocore.session.get_session()
    session = boto3.session.Session(botocore_session=core, profile_name=settings.profile)
    # Share botocore's parsed service models between sessions: a new session per forked worker
    # would otherwise re-read and parse them (0.1-0.4 s of every worker's start).
    core.register_component("data_loader", _botocore_loader())
    return session, core


def _fork_safe(session: Any, settings: S3Settings) -> bool:
    """Whether ``session`` (inherited from the parent process) may make this process's client:
    yes where the settings carry the keys, or its credentials (resolved when the parent made
    its client) do not refresh themselves behind a lock a parent's thread may have held at the
    fork."""
    if settings.access_key_id and settings.secret_access_key:
        return True
    from botocore.credentials import RefreshableCredentials  # type: ignore[import-untyped]

    return not isinstance(session.get_credentials(), RefreshableCredentials)
