"""Cache pools for cookers that ask for ``cache=`` (``@cooker(need_cache=True)``), as in Energon.

A cooker may defer reading a file: ``cache.get_lazy(store, name)`` returns a :class:`Lazy` whose
``get(sample)`` reads it later (e.g. in ``pack_selected_samples``). stoker's pool reads on
``get``, without a disk cache; the interface is Energon's, so such cookers run unchanged.

Example:
    >>> lazy = NoCachePool().to_cache(b"pixels", "0001.jpg")
    >>> lazy.get()
    b'pixels'
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from stoker.aux import FileStore, add_source_info
from stoker.samples import SourceInfo

T = TypeVar("T")


class Lazy(abc.ABC, Generic[T]):
    """A file to read later; ``get(sample)`` reads it (once) and records its source."""

    def __init__(self, ds: FileStore | None, fname: str, pool: CachePool | None) -> None:
        self.ds, self.fname, self.pool = ds, fname, pool

    @abc.abstractmethod
    def get(self, sample: Any = None) -> T:
        """The data; appends its source to ``sample``'s ``__sources__`` if given."""


class DirectLazy(Lazy[T]):
    """Reads from its store on the first ``get``."""

    def __init__(self, ds: FileStore, fname: str, pool: CachePool | None) -> None:
        super().__init__(ds, fname, pool)
        self._store = ds
        self._data: tuple[T, SourceInfo] | None = None

    def get(self, sample: Any = None) -> T:
        if self._data is None:
            self._data = self._store[self.fname]
        add_source_info(sample, self._data[1])
        return self._data[0]


class MockLazy(Lazy[T]):
    """A lazy value made by a function of its name."""

    def __init__(self, fname: str, get_fn: Callable[[str], T]) -> None:
        super().__init__(None, fname, None)
        self.get_fn = get_fn

    def get(self, sample: Any = None) -> T:
        return self.get_fn(self.fname)


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
        """Hold already loaded ``data`` as a :class:`Lazy`."""

    def close(self) -> None:  # noqa: B027 - optional, as in Energon
        """Release what the pool holds."""


class NoCachePool(CachePool):
    """A pool that caches nothing: lazies read from the store when asked."""

    def get(self, ds: FileStore, fname: str, sample: Any = None) -> Any:
        return ds.get(fname, sample)

    def get_lazy(self, ds: FileStore, fname: str) -> Lazy[Any]:
        return DirectLazy(ds, fname, self)

    def to_cache(self, data: T, name: str) -> Lazy[T]:
        return MockLazy(name, lambda _: data)
