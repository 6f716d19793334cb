"""The one interface through which stoker touches bytes: a store rooted at a URL or folder.

Paths given to a store are relative, '/'-separated, and never leave its root. Every layer above
works with a :class:`Store` and a relative path, so local folders and object stores look alike.
"""

from __future__ import annotations

import abc
from typing import BinaryIO


class Store(abc.ABC):
    """A tree of files under one root: a local folder today, an object-store prefix tomorrow."""

    #: The root as the user wrote it (a folder path or a URL), used in messages.
    root: str

    @abc.abstractmethod
    def url(self, path: str) -> str:
        """The full location of ``path`` for messages (e.g. ``/data/ds/a.tar``)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Whether ``path`` is a file in this store."""

    @abc.abstractmethod
    def is_dir(self, path: str) -> bool:
        """Whether ``path`` is a folder (or a non-empty prefix) in this store."""

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """The size of the file ``path`` in bytes."""

    @abc.abstractmethod
    def open(self, path: str) -> BinaryIO:
        """A seekable binary stream over the file ``path``."""

    @abc.abstractmethod
    def read_range(self, path: str, offset: int, size: int) -> bytes:
        """``size`` bytes of ``path`` from ``offset`` (fewer only at the end of the file)."""

    @abc.abstractmethod
    def list_files(self, path: str = "") -> list[str]:
        """All files under ``path``, recursively, as sorted relative paths."""

    @abc.abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path``, creating parent folders; not atomic (see ``publish``)."""

    @abc.abstractmethod
    def publish(self, tmp_path: str, path: str) -> None:
        """Move the finished file ``tmp_path`` to ``path``, replacing what was there."""

    @abc.abstractmethod
    def remove(self, path: str) -> None:
        """Remove the file ``path`` if it exists."""

    @abc.abstractmethod
    def local_path(self, path: str) -> str | None:
        """The local filesystem path of ``path``, or None if the store is not local."""

    def cached_local_path(self, path: str) -> str | None:
        """A local file with the content of ``path`` (for sqlite), or None if it does not exist.

        Local stores return the file itself; remote stores a copy in the metadata cache.
        """
        return self.local_path(path) if self.exists(path) else None

    def modified(self, path: str) -> float | None:
        """When ``path`` was last written (seconds since the epoch); None if unknown."""
        return None

    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path``."""
        with self.open(path) as f:
            return f.read()

    def read_text(self, path: str) -> str:
        """The whole content of ``path`` decoded as UTF-8."""
        return self.read_bytes(path).decode("utf-8")
