"""A seekable read-only stream over a remote file, made of ranged reads.

Remote stores answer :meth:`~stoker.storage.base.Store.open` with this (wrapped in a buffer), so
that every read goes through the store's own ``read_range`` and its retries.
"""

from __future__ import annotations

import io
from typing import Any, BinaryIO

from stoker.storage.base import Store

#: The buffer of a stream: each ranged read fetches at least this much.
READ_AHEAD = 4 << 20


class RangeReader(io.RawIOBase):
    """The file ``path`` of ``store`` (``size`` bytes), read by ``store.read_range``."""

    def __init__(self, store: Store, path: str, size: int) -> None:
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

    def readall(self) -> bytes:
        """The rest of the file in one ranged read (not in pieces of the default buffer size)."""
        data = self._store.read_range(self._path, self._pos, self._size - self._pos)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = min(len(view), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._store.read_range(self._path, self._pos, n)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)


def open_ranged(store: Store, path: str, size: int) -> BinaryIO:
    """A buffered stream over ``path`` (reads of at least :data:`READ_AHEAD` bytes)."""
    return io.BufferedReader(RangeReader(store, path, size), READ_AHEAD)
