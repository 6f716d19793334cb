"""Cache pools for cookers that ask for ``cache=`` (``@cooker(need_cache=True)``), as in Energon.

A cooker may defer reading a file: ``cache.get_lazy(store, name)`` returns a :class:`Lazy` whose
``get(sample)`` reads it later (e.g. in ``pack_selected_samples``). :class:`NoCachePool` (the
default) reads on ``get``; :class:`~stoker.sources.file_cache_pool.FileStoreCachePool` (pass it as
``get_loader(ds, cache_pool=...)``) fetches in the background onto a local cache folder. The
loader makes its pool the current one in each worker; :func:`current_cache_pool` returns it.

Example:
    >>> lazy = NoCachePool().to_cache(b"pixels", "0001.jpg")
    >>> lazy.get()
    b'pixels'
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from stoker.model.samples import SourceInfo
from stoker.sources.aux import FileStore, add_source_info

T = TypeVar("T")


class FileStoreDecoder(abc.ABC):
    """Decodes one file of a :class:`~stoker.sources.aux.FileStore` by its name (Energon's API).

    Example:
        >>> class Upper(FileStoreDecoder):
        ...     def decode(self, fname: str, data: bytes) -> str:
        ...         return data.decode().upper()
        >>> Upper().decode("a.txt", b"hi")
        'HI'
    """

    @abc.abstractmethod
    def decode(self, fname: str, data: bytes) -> Any:
        """The decoded content of the file ``fname`` (``path/key.ext``; the extension decides)."""


class Lazy(abc.ABC, Generic[T]):
    """A file to read later; ``get(sample)`` reads it (once) and records its source.

    Two lazies are equal when they name the same file of the same store (usable as dict keys).
    """

    def __init__(self, ds: FileStore | None, fname: str, pool: CachePool | None) -> None:
        self.ds, self.fname, self.pool = ds, fname, pool

    @abc.abstractmethod
    def get(self, sample: Any = None) -> T:
        """The data; appends its source to ``sample``'s ``__sources__`` if given."""

    def __hash__(self) -> int:
        return hash((id(self.ds), self.fname))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lazy) and self.ds is other.ds and self.fname == other.fname

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fname={self.fname!r})"


class DirectLazy(Lazy[T]):
    """Reads from its store on the first ``get`` (no cache)."""

    def __init__(self, ds: FileStore, fname: str, pool: CachePool | None = None) -> None:
        super().__init__(ds, fname, pool)
        self._data: tuple[T, SourceInfo] | None = None

    def get(self, sample: Any = None) -> T:
        if self._data is None:
            if self.ds is None:
                raise ValueError(f"DirectLazy({self.fname!r}) has no store to read from.")
            self._data = self.ds[self.fname]
        add_source_info(sample, self._data[1])
        return self._data[0]


class MockLazy(Lazy[T]):
    """A lazy value made by a function of its name: ``MockLazy(fname, get_fn)``."""

    def __init__(self, fname: str, get_fn: Callable[[str], T]) -> None:
        super().__init__(None, fname, None)
        self.get_fn = get_fn

    def get(self, sample: Any = None) -> T:
        return self.get_fn(self.fname)

    def __hash__(self) -> int:
        return hash((self.fname, self.get_fn))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MockLazy)
            and self.fname == other.fname
            and self.get_fn == other.get_fn
        )


class CachePool(abc.ABC):
    """Where cookers put files to read later (Energon's interface)."""

    @abc.abstractmethod
    def get(self, ds: FileStore, fname: str, sample: Any = None) -> Any:
        """The file now (``ds.get(fname, sample)``)."""

    @abc.abstractmethod
    def get_lazy(self, ds: FileStore, fname: str) -> Lazy[Any]:
        """A :class:`Lazy` that reads the file when asked."""

    @abc.abstractmethod
    def to_cache(self, data: T, name: str) -> Lazy[T]:
        """Hold already loaded ``data`` as a :class:`Lazy` (``name`` is for debugging)."""

    def close(self) -> None:  # noqa: B027 - optional, as not every pool holds anything
        """Release what the pool holds."""


class NoCachePool(CachePool):
    """A pool that caches nothing: lazies read from the store when asked."""

    def get(self, ds: FileStore, fname: str, sample: Any = None) -> Any:
        return ds.get(fname, sample)

    def get_lazy(self, ds: FileStore, fname: str) -> DirectLazy[Any]:
        return DirectLazy(ds, fname, self)

    def to_cache(self, data: T, name: str) -> Lazy[T]:
        return MockLazy(name, lambda _: data)


_CURRENT: list[CachePool] = []


def use_cache_pool(pool: CachePool | None) -> None:
    """Make ``pool`` this process's current pool (None: back to a :class:`NoCachePool`)."""
    _CURRENT[:] = [pool] if pool is not None else []


def current_cache_pool() -> CachePool:
    """The pool the loader set for this process (worker), else a :class:`NoCachePool`."""
    if not _CURRENT:
        _CURRENT.append(NoCachePool())
    return _CURRENT[0]
