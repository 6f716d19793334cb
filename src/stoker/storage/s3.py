"""S3-compatible object stores (``s3://bucket/prefix``, ``msc://profile/path``) as a :class:`Store`.

One boto3 client per process and settings, made lazily: clients are not fork-safe, so the cache
is keyed by the process id and a forked worker makes its own. botocore's own retries are off
(one attempt per call, with connect and read timeouts); :mod:`stoker.storage.retry` retries
instead, so that a ranged read cut short resumes at the byte it reached rather than starting
over. Every request is counted in :data:`STATS` (per process) for benchmarks.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

from stoker.errors import ConfigError, StorageError
from stoker.storage.base import Store
from stoker.storage.cache import MetaCache, default_cache, is_metadata
from stoker.storage.config import S3Settings
from stoker.storage.retry import RetryPolicy, ShortRead, with_retry

T = TypeVar("T")
_CHUNK = 1 << 20
READ_AHEAD = 4 << 20
_NOT_FOUND = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


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
_LOCK = threading.Lock()
#: The AWS chain's variables a client depends on: a change makes a new client.
_CHAIN_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_REGION",
              "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")  # fmt: skip


def client_for(settings: S3Settings) -> Any:
    """The boto3 S3 client of this process for ``settings`` (made on first use)."""
    key = (os.getpid(), settings, *(os.environ.get(name) for name in _CHAIN_ENV))
    client = _CLIENTS.get(key)
    if client is not None:
        return client
    with _LOCK:
        if key not in _CLIENTS:
            for stale in [k for k in _CLIENTS if k[0] != key[0]]:
                del _CLIENTS[stale]  # inherited through fork: never used here
            _CLIENTS[key] = _make_client(settings)
        return _CLIENTS[key]


_LOADERS: list[Any] = []


def _botocore_loader() -> Any:
    """One botocore data loader per process tree (it caches JSON models; no sockets: fork-safe)."""
    if not _LOADERS:
        import botocore.loaders  # type: ignore[import-untyped]

        _LOADERS.append(botocore.loaders.create_loader())
    return _LOADERS[0]


def _make_client(settings: S3Settings) -> Any:
    try:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(
            "s3:// paths need boto3.", hint="Install the extra: pip install 'stoker[s3]'."
        ) from None
    session = boto3.session.Session(profile_name=settings.profile)
    # Share botocore's parsed service models between sessions: a new session per forked worker
    # would otherwise re-read and parse them (0.1-0.4 s of every worker's start).
    session._session.register_component("data_loader", _botocore_loader())
    return session.client(
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


def parse_s3_url(location: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> (``bucket``, ``a/b``)."""
    bucket, _, prefix = location[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError("an s3:// URL needs a bucket.", path=location, hint="s3://bucket/path")
    return bucket, prefix.strip("/")


class S3Store(Store):
    """Objects under ``prefix`` of ``bucket``; ``root`` is the URL the user wrote."""

    def __init__(self, root: str, settings: S3Settings, bucket: str, prefix: str) -> None:
        self.root = root.rstrip("/")
        self.settings = settings
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.policy = RetryPolicy(
            settings.max_attempts, settings.max_seconds, settings.base_delay, settings.max_delay
        )

    # -- plumbing -------------------------------------------------------------------------
    def _key(self, path: str) -> str:
        path = path.strip("/")
        return f"{self.prefix}/{path}" if self.prefix and path else self.prefix or path

    def _call(self, op: str, path: str, fn: Callable[[Any], T], what: str = "") -> T:
        """``fn(client)`` with retries; S3 errors become :class:`StorageError`."""

        def attempt() -> T:
            STATS.count(op)
            return fn(client_for(self.settings))

        try:
            return with_retry(attempt, self.policy, what=what or op, url=self.url(path))
        except StorageError:
            raise
        except Exception as e:
            raise self._error(e, op, path) from e

    def _error(self, e: Exception, op: str, path: str) -> StorageError:
        code = _code(e)
        where = self.url(path)
        if code in _NOT_FOUND:
            return StorageError("object not found.", path=where, hint="Check the URL.")
        if code in _DENIED:
            return StorageError(
                f"access denied ({code}).",
                path=where,
                hint="Check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the "
                "profile, or STOKER_STORAGE_CONFIG) and the bucket's permissions.",
            )
        if type(e).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            return StorageError(
                "no credentials for the object store.",
                path=where,
                hint="Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or "
                "credentials in the file STOKER_STORAGE_CONFIG names.",
            )
        return StorageError(f"{op} failed: {type(e).__name__}: {e}.", path=where)

    def _get(self, path: str, start: int, end: int | None, if_none_match: str = "") -> _Got:
        """Bytes ``[start, end)`` (to the object's end if None), resuming after a cut."""
        got = _Got()
        key = self._key(path)

        def attempt(client: Any) -> _Got:
            pos = start + len(got.data)
            args: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
            if got.etag:
                args["IfMatch"] = got.etag  # never splice two versions of an object
            elif if_none_match:
                args["IfNoneMatch"] = if_none_match
            if end is not None:
                args["Range"] = f"bytes={pos}-{end - 1}"
            elif pos:
                args["Range"] = f"bytes={pos}-"
            try:
                response = client.get_object(**args)
            except Exception as e:
                if _code(e) == "InvalidRange":  # at or past the end: nothing left
                    return got
                if _code(e) in ("304", "NotModified"):
                    got.not_modified = True
                    return got
                raise
            got.etag = got.etag or response.get("ETag", "")
            expected = int(response.get("ContentLength", 0))
            body = response["Body"]
            received = 0
            try:
                while chunk := body.read(_CHUNK):
                    got.data += chunk
                    received += len(chunk)
                    STATS.count(received=len(chunk))
            finally:
                body.close()
            if received < expected:
                raise ShortRead(f"received {received} of {expected} bytes")
            return got

        what = f"GET {self.bucket}/{key}" + (f" bytes {start}-{end - 1}" if end else "")
        return self._call("GET", path, attempt, what)

    # -- the Store interface ----------------------------------------------------------------
    def url(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root

    def _head(self, path: str) -> dict[str, Any] | None:
        try:
            head: dict[str, Any] = self._call(
                "HEAD",
                path,
                lambda c: c.head_object(Bucket=self.bucket, Key=self._key(path)),
            )
        except StorageError as e:
            if _code(e.__cause__) in _NOT_FOUND:
                return None
            raise
        return head

    def exists(self, path: str) -> bool:
        return bool(path) and self._head(path) is not None

    def is_dir(self, path: str) -> bool:
        key = self._key(path)
        if not key:
            self._call("HEAD bucket", path, lambda c: c.head_bucket(Bucket=self.bucket))
            return True
        found = self._call(
            "LIST",
            path,
            lambda c: c.list_objects_v2(Bucket=self.bucket, Prefix=key + "/", MaxKeys=1),
        )
        return int(found.get("KeyCount", 0)) > 0

    def size(self, path: str) -> int:
        head = self._head(path)
        if head is None:
            raise StorageError("object not found.", path=self.url(path), hint="Check the URL.")
        return int(head["ContentLength"])

    def open(self, path: str) -> BinaryIO:
        return io.BufferedReader(_RangeReader(self, path, self.size(path)), READ_AHEAD)

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        return bytes(self._get(path, offset, offset + size).data)

    def read_bytes(self, path: str) -> bytes:
        cache = default_cache()
        if cache is None or not is_metadata(path):
            return bytes(self._get(path, 0, None).data)
        return _cached_read(self, cache, path)

    def list_files(self, path: str = "") -> list[str]:
        base = self._key(path)
        prefix = f"{base}/" if base else ""
        strip = len(f"{self.prefix}/") if self.prefix else 0
        found: list[str] = []
        token: str | None = None
        while True:  # one page per request; ends when the server says it is the last
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                args["ContinuationToken"] = token
            page: dict[str, Any] = self._call("LIST", path, _lister(args))
            found += [o["Key"][strip:] for o in page.get("Contents", ()) if o["Key"][-1] != "/"]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return sorted(found)  # the server's order need not be S3's

    def write_bytes(self, path: str, data: bytes) -> None:
        key = self._key(path)
        self._call("PUT", path, lambda c: c.put_object(Bucket=self.bucket, Key=key, Body=data))

    def publish(self, tmp_path: str, path: str) -> None:
        # A server-side copy replaces the object in one step (readers see the old or the new
        # object, never a mix), then the temporary object goes. S3 has no rename.
        source = {"Bucket": self.bucket, "Key": self._key(tmp_path)}
        key = self._key(path)
        self._call(
            "COPY", path, lambda c: c.copy_object(Bucket=self.bucket, Key=key, CopySource=source)
        )
        self.remove(tmp_path)

    def remove(self, path: str) -> None:
        key = self._key(path)
        self._call("DELETE", path, lambda c: c.delete_object(Bucket=self.bucket, Key=key))

    def local_path(self, path: str) -> str | None:
        return None

    def cached_local_path(self, path: str) -> str | None:
        """A local copy of ``path`` in the metadata cache (downloaded once per version)."""
        head = self._head(path)
        if head is None:
            return None
        version = f"{head.get('ETag', '')}:{head['ContentLength']}"
        cache = default_cache() or _scratch_cache()
        hit = cache.get(self.url(path), version)
        if hit is not None:
            return hit
        data = self._get(path, 0, None).data
        return cache.put_bytes(self.url(path), version, bytes(data))

    def __repr__(self) -> str:
        return f"S3Store({self.root!r})"


def _lister(args: dict[str, Any]) -> Callable[[Any], Any]:
    return lambda client: client.list_objects_v2(**args)


@dataclass
class _Got:
    data: bytearray = field(default_factory=bytearray)
    etag: str = ""
    not_modified: bool = False


def _cached_read(store: S3Store, cache: MetaCache, path: str) -> bytes:
    """One conditional GET: the cached copy if the object did not change, else the new bytes."""
    url = store.url(path)
    pointer = cache.entry(url, "latest")
    etag = ""
    with contextlib.suppress(OSError), open(pointer, encoding="utf-8") as f:
        etag = f.read()
    cached = cache.get(url, etag) if etag else None
    got = store._get(path, 0, None, if_none_match=etag if cached else "")
    if got.not_modified and cached is not None:
        with contextlib.suppress(OSError), open(cached, "rb") as f:
            return f.read()
        got = store._get(path, 0, None)  # evicted between the check and the read
    data = bytes(got.data)
    if got.etag:
        cache.put_bytes(url, got.etag, data)
        cache.put_bytes(url, "latest", got.etag.encode())
    return data


class _RangeReader(io.RawIOBase):
    """A seekable read-only stream over one object, by ranged GETs."""

    def __init__(self, store: S3Store, path: str, size: int) -> None:
        self._store, self._path, self._size, self._pos = store, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._store.read_range(self._path, self._pos, n)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)


_SCRATCH: list[MetaCache] = []


def _scratch_cache() -> MetaCache:
    """A per-process temporary cache, when the shared one is turned off."""
    if not _SCRATCH:
        folder = tempfile.mkdtemp(prefix="stoker-cache-")
        atexit.register(shutil.rmtree, folder, True)
        _SCRATCH.append(MetaCache(folder))
    return _SCRATCH[0]


def _code(e: BaseException | None) -> str:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))
