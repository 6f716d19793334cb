"""Any other filesystem fsspec knows (``gs://``, ``az://``, ``http(s)://``, ``memory://``, ...)
as a :class:`Store`.

Each process uses its own filesystem (:mod:`stoker.storage.fsspec_fs`). Requests retry with
:mod:`stoker.storage.retry` (same budget as S3: the ``retry`` settings of the file
``STOKER_STORAGE_CONFIG`` names); a ranged read that fails is asked for again whole (fsspec
returns a body whole or not at all).

HTTP is read-only and cannot list folders: a prepared dataset loads from it, because
``.nv-meta`` names its shards, but ``stoker prepare`` needs a store that can list and write.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

from stoker.errors import StorageError
from stoker.storage.base import Store
from stoker.storage.cache import default_cache, is_metadata, read_entry, scratch_cache
from stoker.storage.config import S3Settings, load_storage_config
from stoker.storage.fsspec_fs import check_protocol, filesystem_for, protocol_of
from stoker.storage.options import retry_policy
from stoker.storage.ranged import open_ranged
from stoker.storage.retry import is_transient, with_retry

T = TypeVar("T")
#: Protocols whose servers take no writes through stoker and offer no listing of a folder.
READ_ONLY = frozenset({"http", "https"})
_SERVE_HINT = (
    "Prepare the dataset on local disk or object storage (where `stoker prepare` can list and "
    "write), then serve the prepared folder, .nv-meta included; loading needs no listing."
)


class FsspecStore(Store):
    """Files under the URL ``root``, through fsspec's filesystem for its protocol.

    Example:
        >>> store = FsspecStore("memory://datasets/coco")
        >>> store.write_bytes("a.txt", b"hello")
        >>> store.read_range("a.txt", 1, 3)
        b'ell'
        >>> store.list_files()
        ['a.txt']
    """

    def __init__(self, root: str, settings: S3Settings | None = None) -> None:
        check_protocol(root)
        self.root = root.rstrip("/")
        self.protocol = protocol_of(root)
        self.settings = settings or load_storage_config().default
        self.read_only = self.protocol in READ_ONLY

    # -- plumbing -------------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        return filesystem_for(self.protocol, self.settings)

    def _call(self, op: str, path: str, fn: Callable[[Any, str], T], what: str = "") -> T:
        """``fn(filesystem, url)`` with retries; failures become :class:`StorageError`."""
        url = self.url(path)
        try:
            return with_retry(
                lambda: fn(self.fs, url),
                retry_policy(self.settings.retry),
                what=what or f"{op} {url}",
                url=url,
            )
        except StorageError:
            raise
        except FileNotFoundError as e:
            raise StorageError("file not found.", path=url, hint="Check the URL.") from e
        except PermissionError as e:
            raise StorageError(
                f"access denied ({e}).",
                path=url,
                hint=f"Check the credentials fsspec uses for {self.protocol}://.",
            ) from e
        except Exception as e:
            status = getattr(e, "status", None)
            if status in (401, 403):
                raise StorageError(
                    f"access denied (HTTP {status}).",
                    path=url,
                    hint=f"Check the credentials fsspec uses for {self.protocol}://.",
                ) from e
            raise StorageError(f"{op} failed: {type(e).__name__}: {e}.", path=url) from e

    def _info(self, path: str) -> dict[str, Any] | None:
        """The file's info, or None if there is no file ``path``."""

        def info(fs: Any, url: str) -> dict[str, Any] | None:
            try:
                found: dict[str, Any] = fs.info(url)
            except FileNotFoundError as e:
                cause = e.__cause__  # HTTP: any failure is reported as "not found"
                if cause is not None and is_transient(cause):
                    raise cause from None
                return None
            return found if found.get("type", "file") == "file" else None

        return self._call("HEAD", path, info)

    def _writable(self, op: str, path: str) -> None:
        if self.read_only:
            raise StorageError(
                f"cannot {op}: {self.protocol}:// URLs are read-only.",
                path=self.url(path),
                hint=_SERVE_HINT,
            )

    # -- the Store interface ----------------------------------------------------------------
    def url(self, path: str) -> str:
        return f"{self.root}/{path}" if path else self.root

    def exists(self, path: str) -> bool:
        return self._info(path) is not None  # "" too: a store rooted at a file (EPath)

    def is_dir(self, path: str) -> bool:
        if self.read_only:  # no listing: a folder is anything that is not a file
            return not self.exists(path)
        return bool(self._call("LIST", path, lambda fs, url: fs.isdir(url)))

    def _existing(self, path: str) -> dict[str, Any]:
        info = self._info(path)
        if info is None:
            raise StorageError("file not found.", path=self.url(path), hint="Check the URL.")
        return info

    def size(self, path: str) -> int:
        info = self._existing(path)
        if info.get("size") is None:
            raise StorageError(
                "the server does not report the file's size.",
                path=self.url(path),
                hint="Serve it with a Content-Length header.",
            )
        return int(info["size"])

    def open(self, path: str) -> BinaryIO:
        return open_ranged(self, path, self.size(path))

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""

        def ranged(fs: Any, url: str) -> bytes:
            data: bytes = fs.cat_file(url, start=offset, end=offset + size)
            if len(data) > size:
                raise StorageError(
                    f"asked for {size} bytes from offset {offset}, received {len(data)}: the "
                    "server ignores ranged reads.",
                    path=url,
                    hint="Serve the files with a server that supports HTTP Range requests.",
                )
            return data

        return self._call(
            "GET", path, ranged, f"GET {self.url(path)} bytes {offset}-{offset + size - 1}"
        )

    def read_bytes(self, path: str) -> bytes:
        cache = default_cache()
        if cache is None or not is_metadata(path):
            return self._cat(path)
        url = self.url(path)
        data = cache.fresh(url)
        if data is not None:
            return data
        version = _version(self._existing(path))
        if version is None:  # changes cannot be told: no caching
            return self._cat(path)
        hit = cache.get(url, version)
        data = read_entry(hit) if hit else None
        if data is None:
            data = self._cat(path)
            cache.put_bytes(url, version, data)
        cache.confirm(url, version)
        return data

    def _cat(self, path: str) -> bytes:
        return bytes(self._call("GET", path, lambda fs, url: fs.cat_file(url)))

    def list_files(self, path: str = "") -> list[str]:
        if self.read_only:
            raise StorageError(
                f"cannot list files: {self.protocol}:// servers offer no listing of a folder.",
                path=self.url(path),
                hint=_SERVE_HINT,
            )
        base = self.fs._strip_protocol(self.root).rstrip("/") + "/"
        found = self._call("LIST", path, lambda fs, url: fs.find(url, detail=False))
        return sorted(name[len(base) :] for name in found if name.startswith(base))

    def write_bytes(self, path: str, data: bytes) -> None:
        self._writable("write", path)
        self._call("PUT", path, lambda fs, url: fs.pipe_file(url, data))

    def publish(self, tmp_path: str, path: str) -> None:
        # As on S3: a copy replaces the object in one step (readers see the old or the new
        # one), then the temporary goes. Not ``mv``: gcsfs's tries a move call first and
        # retries it for half a minute where a GCS-compatible server lacks it.
        self._writable("publish", path)
        source = self.url(tmp_path)
        self._call("COPY", path, lambda fs, url: fs.copy(source, url))
        self.remove(tmp_path)

    def remove(self, path: str) -> None:
        self._writable("remove", path)

        def rm(fs: Any, url: str) -> None:
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(url)

        self._call("DELETE", path, rm)

    def local_path(self, path: str) -> str | None:
        return None

    def cached_local_path(self, path: str) -> str | None:
        """A local copy of ``path`` in the metadata cache (downloaded once per version)."""
        info = self._info(path)
        if info is None:
            return None
        version = _version(info)
        cache = default_cache() if version is not None else None
        cache = cache or scratch_cache()
        version = version or f"unversioned-{os.getpid()}-{id(self)}"
        hit = cache.get(self.url(path), version)
        return hit or cache.put_bytes(self.url(path), version, self._cat(path))

    def __repr__(self) -> str:
        return f"FsspecStore({self.root!r})"


def _version(info: dict[str, Any]) -> str | None:
    """What changes when the file changes (ETag or mtime, with the size), if known."""
    for name in ("ETag", "etag", "md5", "Last-Modified", "LastModified", "mtime", "updated"):
        if info.get(name):
            return f"{info[name]}:{info.get('size')}"
    return None
