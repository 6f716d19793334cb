"""A local disk cache of small remote metadata files (``.tar.idx``, ``.nv-meta/*``,
``index.sqlite``), shared by every process of a machine.

An entry is keyed by the object's URL and its version (ETag and size), so a changed object is a
new entry and never a stale one. Entries are written to a temporary file and renamed into place,
so a reader sees a whole file or none, and many worker processes may fill the cache at once (the
last rename wins; the contents are identical). The total size is kept under a bound by removing
the least recently used entries (an open file survives its removal on POSIX).

Each URL also has a pointer to its latest version, touched whenever a process checks the version
against the store. Within ``LoaderOptions.cache_fresh_seconds`` (default 10 s) of such a check,
other processes (the dataloader workers of all ranks of a machine, starting together) trust it and
ask the store nothing; 0 checks on every read.

``LoaderOptions.cache_dir`` moves it (default ``~/.cache/stoker``; None disables it) and
``cache_max_bytes`` bounds it (default 4 GiB); their defaults come from ``STOKER_CACHE_DIR``
(``off`` disables it), ``STOKER_CACHE_MAX_BYTES`` and ``STOKER_CACHE_FRESH_SECONDS``
(:mod:`stoker.storage.options`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from stoker.storage.options import CACHE_FRESH_SECONDS, CACHE_MAX_BYTES, current

DEFAULT_MAX_BYTES = CACHE_MAX_BYTES
DEFAULT_FRESH_SECONDS = CACHE_FRESH_SECONDS
_LATEST = "latest"
_SUBDIR = "objects"

#: Files next to shards that hold metadata (a shard's index, a JSONL file's index).
META_SUFFIXES = (".idx",)

__all__ = [
    "META_SUFFIXES",
    "MetaCache",
    "default_cache",
    "is_metadata",
    "read_entry",
    "scratch_cache",
]


def is_metadata(path: str) -> bool:
    """Whether ``path`` is a metadata file worth caching (not a shard, not a temporary file)."""
    if ".stoker-tmp" in path:
        return False
    return path.endswith(META_SUFFIXES) or path.startswith(".nv-meta/") or "/.nv-meta/" in path


@dataclass(frozen=True)
class MetaCache:
    """Cached copies of remote objects under ``root``, at most ``max_bytes`` in all."""

    root: str
    max_bytes: int = DEFAULT_MAX_BYTES
    #: How long a checked version is trusted without asking the store again.
    fresh_seconds: float = DEFAULT_FRESH_SECONDS

    def entry(self, url: str, version: str) -> str:
        """The local path an object of this URL and version is cached at."""
        name = hashlib.sha256(url.encode()).hexdigest()[:40]
        tag = hashlib.sha256(version.encode()).hexdigest()[:16]
        return os.path.join(self.root, _SUBDIR, name[:2], f"{name}.{tag}")

    def get(self, url: str, version: str) -> str | None:
        """The cached copy, if any (marked as recently used)."""
        path = self.entry(url, version)
        try:
            os.utime(path)
        except OSError:
            return None
        return path

    def latest(self, url: str) -> tuple[str, float] | None:
        """The latest known version of ``url`` and the seconds since it was last checked."""
        pointer = self.entry(url, _LATEST)
        try:
            with open(pointer, encoding="utf-8") as f:
                version = f.read()
            age = time.time() - os.stat(pointer).st_mtime
        except OSError:
            return None
        return (version, max(0.0, age)) if version else None

    def fresh(self, url: str) -> bytes | None:
        """The cached content of ``url`` if its version was checked less than
        ``fresh_seconds`` ago (by any process), else None."""
        latest = self.latest(url)
        if latest is None or latest[1] >= self.fresh_seconds:
            return None
        hit = self.get(url, latest[0])
        return read_entry(hit) if hit else None

    def confirm(self, url: str, version: str) -> None:
        """Record that the store has ``version`` of ``url`` now (a check just made)."""
        known = self.latest(url)
        if known is not None and known[0] == version:
            with contextlib.suppress(OSError):
                os.utime(self.entry(url, _LATEST))
                return
        self.put_bytes(url, _LATEST, version.encode())

    def put(self, url: str, version: str, fill: Callable[[int], None]) -> str:
        """Cache a new copy: ``fill(fd)`` writes the content into an open file descriptor."""
        path = self.entry(url, version)
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            try:
                fill(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        self.trim(keep=path)
        return path

    def put_bytes(self, url: str, version: str, data: bytes) -> str:
        return self.put(url, version, lambda fd: _write_all(fd, data))

    def trim(self, keep: str | None = None) -> None:
        """Remove the least recently used entries until the total fits ``max_bytes``."""
        entries = []
        for dirpath, _, files in os.walk(os.path.join(self.root, _SUBDIR)):
            for name in files:
                path = os.path.join(dirpath, name)
                with contextlib.suppress(OSError):
                    st = os.stat(path)
                    entries.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            if path == keep or os.path.basename(path).startswith(".tmp-"):
                continue
            with contextlib.suppress(OSError):
                os.remove(path)
                total -= size


def default_cache() -> MetaCache | None:
    """The cache the process's :class:`~stoker.storage.options.LoaderOptions` configure
    (``cache_dir``, ``cache_max_bytes``, ``cache_fresh_seconds``), or None when off."""
    options = current()
    if options.cache_dir is None:
        return None
    return MetaCache(options.cache_dir, options.cache_max_bytes, options.cache_fresh_seconds)


def read_entry(path: str) -> bytes | None:
    """The content of a cache entry, or None if it was removed meanwhile."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


_SCRATCH: list[MetaCache] = []


def scratch_cache() -> MetaCache:
    """A temporary cache of this process (removed at exit), for when the shared one is off."""
    if not _SCRATCH:
        folder = tempfile.mkdtemp(prefix="stoker-cache-")
        atexit.register(shutil.rmtree, folder, True)
        _SCRATCH.append(MetaCache(folder))
    return _SCRATCH[0]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
