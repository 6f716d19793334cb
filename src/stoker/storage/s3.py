"""S3-compatible object stores (``s3://bucket/prefix``, ``msc://profile/path``) as a :class:`Store`.

Requests go through the process's boto3 client (:mod:`stoker.storage.s3_client`) and retry with
:mod:`stoker.storage.retry`, so that a ranged read cut short resumes at the byte it reached
rather than starting over. GETs, the bulk of the requests, skip botocore's per-call pipeline
(:mod:`stoker.storage.s3_get`). Every request is counted in :data:`STATS` (per process) for
benchmarks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeVar

from stoker.errors import ConfigError, StorageError
from stoker.storage.base import Store
from stoker.storage.cache import MetaCache, default_cache, is_metadata, read_entry, scratch_cache
from stoker.storage.config import S3Settings
from stoker.storage.options import retry_policy
from stoker.storage.ranged import open_ranged
from stoker.storage.retry import with_retry
from stoker.storage.s3_body import body_length, receive
from stoker.storage.s3_client import STATS, RequestStats, client_for, expect_client
from stoker.storage.s3_get import S3HttpError, getter_for

__all__ = ["STATS", "RequestStats", "S3Store", "client_for", "parse_s3_url"]

T = TypeVar("T")
_NOT_FOUND = {"404", "NoSuchKey", "NoSuchBucket", "NotFound"}
_DENIED = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


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
        expect_client(settings)  # the loader's forked workers will want a client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        #: HEAD answers for metadata files (path -> (when, answer)), trusted as long as the
        #: metadata cache trusts a checked version: a dataset's loading asks for the same
        #: file's existence, size and content in turn.
        self._heads: dict[str, tuple[float, dict[str, Any] | None]] = {}

    # -- plumbing -------------------------------------------------------------------------
    def _key(self, path: str) -> str:
        path = path.strip("/")
        return f"{self.prefix}/{path}" if self.prefix and path else self.prefix or path

    def _call(
        self,
        op: str,
        path: str,
        fn: Callable[[Any], T],
        what: str = "",
        progress: Callable[[], int] = lambda: 0,
    ) -> T:
        """``fn(client)`` with retries; S3 errors become :class:`StorageError`."""

        def attempt() -> T:
            STATS.count(op)
            return fn(client_for(self.settings))

        what = what or f"{op} {self.bucket}/{self._key(path)}"
        try:
            return with_retry(
                attempt,
                retry_policy(self.settings.retry),
                what=what,
                url=self.url(path),
                progress=progress,
            )
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
            pos = start + got.size
            if end is not None and pos >= end:  # all arrived, the deadline came after
                return got
            headers: dict[str, str] = {}
            if got.etag:
                headers["If-Match"] = got.etag  # never splice two versions of an object
            elif if_none_match:
                headers["If-None-Match"] = if_none_match
            if end is not None:
                headers["Range"] = f"bytes={pos}-{end - 1}"
            elif pos:
                headers["Range"] = f"bytes={pos}-"
            try:
                response = getter_for(client).get(self.bucket, key, headers)
            except S3HttpError as e:
                if e.status == 416:  # at or past the end: nothing left
                    return got
                if e.status == 304:
                    got.not_modified = True
                    return got
                raise
            try:
                expected = body_length(response, pos, end, "Range" in headers, self.url(path))
                framed = response.headers.get("Content-Length") is not None
            except BaseException:
                response.close()
                raise
            got.etag = got.etag or response.headers.get("ETag", "")
            receive(response, got, expected, framed)
            return got

        what = f"GET {self.bucket}/{key}" + (f" bytes {start}-{end - 1}" if end else "")
        return self._call("GET", path, attempt, what, progress=lambda: got.size)

    # -- the Store interface ----------------------------------------------------------------
    def url(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root

    def _head(self, path: str) -> dict[str, Any] | None:
        cache = default_cache() if is_metadata(path) else None
        if cache is not None:
            when, head = self._heads.get(path, (0.0, None))
            if time.monotonic() - when < cache.fresh_seconds:
                return head
        try:
            head = self._call(
                "HEAD",
                path,
                lambda c: c.head_object(Bucket=self.bucket, Key=self._key(path)),
            )
        except StorageError as e:
            if _code(e.__cause__) not in _NOT_FOUND:
                raise
            head = None
        if cache is not None:
            self._heads[path] = (time.monotonic(), head)
        return head

    def _fresh_metadata(self, path: str) -> bytes | None:
        """The cached copy of a metadata file whose version was checked moments ago (by any
        process: see :mod:`stoker.storage.cache`), else None."""
        cache = default_cache() if is_metadata(path) else None
        return cache.fresh(self.url(path)) if cache is not None else None

    def exists(self, path: str) -> bool:
        if not self._key(path):
            return False
        return self._fresh_metadata(path) is not None or self._head(path) is not None

    def is_dir(self, path: str) -> bool:
        key = self._key(path)
        prefix = key + "/" if key else ""  # a bucket is a folder while it holds an object
        found = self._call(
            "LIST",
            path,
            lambda c: c.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1),
        )
        return int(found.get("KeyCount", 0)) > 0

    def size(self, path: str) -> int:
        fresh = self._fresh_metadata(path)
        if fresh is not None:
            return len(fresh)
        head = self._head(path)
        if head is None:
            raise StorageError("object not found.", path=self.url(path), hint="Check the URL.")
        return int(head["ContentLength"])

    def modified(self, path: str) -> float | None:
        head = self._head(path)
        stamp = head.get("LastModified") if head is not None else None
        return stamp.timestamp() if stamp is not None else None

    def open(self, path: str) -> BinaryIO:
        return open_ranged(self, path, self.size(path))

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        return self._get(path, offset, offset + size).data

    def read_bytes(self, path: str) -> bytes:
        cache = default_cache()
        if cache is None or not is_metadata(path):
            return self._get(path, 0, None).data
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
        self._heads.pop(path, None)
        key = self._key(path)
        self._call("PUT", path, lambda c: c.put_object(Bucket=self.bucket, Key=key, Body=data))

    def publish(self, tmp_path: str, path: str) -> None:
        # A server-side copy replaces the object in one step (readers see the old or the new
        # object, never a mix), then the temporary object goes. S3 has no rename.
        source = {"Bucket": self.bucket, "Key": self._key(tmp_path)}
        key = self._key(path)
        self._heads.pop(path, None)
        self._call(
            "COPY", path, lambda c: c.copy_object(Bucket=self.bucket, Key=key, CopySource=source)
        )
        self.remove(tmp_path)

    def remove(self, path: str) -> None:
        self._heads.pop(path, None)
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
        cache = default_cache() or scratch_cache()
        hit = cache.get(self.url(path), version)
        if hit is not None:
            return hit
        data = self._get(path, 0, None).data
        return cache.put_bytes(self.url(path), version, data)

    def __repr__(self) -> str:
        return f"S3Store({self.root!r})"


def _lister(args: dict[str, Any]) -> Callable[[Any], Any]:
    return lambda client: client.list_objects_v2(**args)


@dataclass
class _Got:
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    etag: str = ""
    not_modified: bool = False

    @property
    def data(self) -> bytes:
        if len(self.chunks) > 1:
            self.chunks[:] = [b"".join(self.chunks)]
        return self.chunks[0] if self.chunks else b""


def _cached_read(store: S3Store, cache: MetaCache, path: str) -> bytes:
    """The cached copy if its version was checked moments ago (by any process) or a conditional
    GET says it did not change; else the new bytes, cached."""
    url = store.url(path)
    data = cache.fresh(url)
    if data is not None:
        return data
    latest = cache.latest(url)
    cached = cache.get(url, latest[0]) if latest else None
    got = store._get(path, 0, None, if_none_match=latest[0] if latest and cached else "")
    if got.not_modified and latest and cached:
        data = read_entry(cached)
        if data is not None:
            cache.confirm(url, latest[0])
            return data
        got = store._get(path, 0, None)  # evicted between the check and the read
    if got.etag:
        cache.put_bytes(url, got.etag, got.data)
        cache.confirm(url, got.etag)
    return got.data


def _code(e: BaseException | None) -> str:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))
