"""Aux stores: files a cooker fetches by name, from a prepared dataset or a plain folder.

A metadataset leaf names them (``aux: {images: ./image_ds, files: filesystem://./folder}``);
each cooker call receives them as keyword arguments. ``store.get(name, sample)`` returns the
file, decoded by the task encoder's decoder by its extension (raw bytes when the decoder is
``None``), and appends where it came from to the sample's ``__sources__``. In a prepared dataset
a name is a tar member: sample key + part, like ``"0001.jpg"``. Names follow Energon's
``FileStore`` classes; stores open lazily, once per worker.

Example:
    >>> store = SystemFileStore("raw")
    >>> store.get("000001.jpg")[:3]
    b'\\xff\\xd8\\xff'
"""

from __future__ import annotations

import abc
import os
import posixpath
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError, MissingSampleIndexError, SampleError
from stoker.format.meta import INDEX_SQLITE, INFO_JSON, INFO_YAML, read_info
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.format.tar import split_name
from stoker.metadataset.nodes import AuxRef
from stoker.model.samples import SourceInfo
from stoker.pipeline.read import ShardReader
from stoker.storage import Store, open_store, split_location
from stoker.storage.epath import EPath

if TYPE_CHECKING:  # decoding needs torch; importing this module must not
    from stoker.model.cache_pool import FileStoreDecoder
    from stoker.pipeline.decode import SampleDecoder


class FileStore(abc.ABC):
    """Files by name; ``store[name]`` is ``(data, SourceInfo)``, :meth:`get` the data alone.

    ``FileStore[bytes]`` is accepted (Energon's generic spelling) and means ``FileStore``.
    """

    def __class_getitem__(cls, item: Any) -> type[FileStore]:
        return cls

    @abc.abstractmethod
    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        """The file ``key`` and where it came from; a :class:`SampleError` if missing."""

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        """The file's bytes before any decoding (what a cache pool stores with ``raw``)."""
        return self[key]

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        """Decode what :meth:`_get_raw` returned (``fname=`` names the file)."""
        return data

    def _cache_name(self, key: str) -> str:
        """The name that identifies ``key``'s file in this store (for cache pools)."""
        return key

    @abc.abstractmethod
    def get_path(self) -> str:
        """Where the store reads from."""

    def get(self, key: str, sample: Any = None) -> Any:
        """The file ``key``; records its source in ``sample``'s ``__sources__`` if given."""
        data, info = self[key]
        add_source_info(sample, info)
        return data

    def get_media_metadata(self, key: str) -> Any:
        """The stored media metadata of the file ``key`` (see ``stoker prepare-media``).

        Example:
            >>> clips = SystemFileStore("clips")  # prepared by prepare-media
            >>> clips.get_media_metadata("clip_007.mp4").video_fps
            30.0
        """
        raise ConfigError(
            f"aux store {self.get_path()!r} keeps no media metadata.",
            hint="Media metadata comes with prepared datasets: run `stoker prepare-media` on "
            "the dataset and use it as the aux source.",
        )

    def _missing(self, key: str, why: str = "") -> SampleError:
        return SampleError(
            f"aux store {self.get_path()!r} has no file {key!r}{why}.",
            hint="Check the file names the crude samples refer to, and the aux paths in the "
            "metadataset.",
        )


class SystemFileStore(FileStore):
    """The files of a folder (``filesystem://`` in a metadataset); names are relative paths."""

    def __init__(self, base_dir: str | os.PathLike[str] | EPath | None = None) -> None:
        self.base_dir = str(base_dir) if base_dir is not None else "/"
        self._store = open_store(self.base_dir)
        self._absolute = base_dir is None  # names are absolute paths, as in Energon

    def __getitem__(self, key: str) -> tuple[bytes, SourceInfo]:
        name = posixpath.normpath(key.lstrip("/") if self._absolute else key)
        if posixpath.isabs(name) or name == ".." or name.startswith("../"):
            raise self._missing(key, " (names must stay inside the folder)")
        if not self._store.exists(name):
            raise self._missing(key)
        info = SourceInfo(
            dataset_path=self.base_dir, index=key, shard_name=self.base_dir, file_names=(key,)
        )
        return self._store.read_bytes(name), info

    def get_path(self) -> str:
        return self.base_dir

    def get_media_metadata(self, key: str) -> Any:
        """From ``.nv-meta/index.sqlite`` in the folder (``stoker``/``energon prepare-media``)."""
        from stoker.media.lookup import get_media_metadata

        return get_media_metadata(self.base_dir, posixpath.normpath(key))


class WebdatasetFileStore(FileStore):
    """The tar members of a prepared dataset, found through its ``index.sqlite``."""

    def __init__(self, path: str | os.PathLike[str] | EPath) -> None:
        self.path = path = str(path)
        store = open_store(path)
        _require_index(store, path)
        self._index = SqliteIndexReader(store.cached_local_path(INDEX_SQLITE) or "")
        self._reader = ShardReader(store, list(read_info(store).shard_counts))

    def __getitem__(self, key: str) -> tuple[bytes, SourceInfo]:
        split = split_name(key)
        location = self._index.locate(split[0]) if split is not None else None
        if split is None or location is None:
            raise self._missing(key)
        shard = self._reader.shards[location.shard_id]
        info = SourceInfo(dataset_path=self.path, index=key, shard_name=shard, file_names=(key,))
        for part, offset, size in self._index.parts(location.shard_id, location.index):
            if part == split[1]:
                return self._reader.store.read_range(shard, offset, size), info
        # An index without sample_parts rows: read the whole sample.
        parts = self._reader.read(location.shard_id, location.index).parts
        if split[1] not in parts:
            raise self._missing(key)
        return parts[split[1]], info

    def get_path(self) -> str:
        return self.path

    def get_media_metadata(self, key: str) -> Any:
        from stoker.media.lookup import get_media_metadata

        return get_media_metadata(self.path, key)


class JsonlFileStore(FileStore):
    """The lines of an indexed JSONL file by number (``"12"`` or ``"12.json"``): raw JSON."""

    def __init__(self, path: str | os.PathLike[str] | EPath) -> None:
        self.path = path = str(path)
        parent, name = split_location(path)
        self._reader = ShardReader(open_store(parent), [name], jsonl=True)

    def __getitem__(self, key: str) -> tuple[bytes, SourceInfo]:
        number = key.removesuffix(".json")
        if not number.isdigit() or int(number) >= len(self._reader.offsets(0)) - 1:
            raise self._missing(key)
        raw = self._reader.read(0, int(number))
        info = SourceInfo(
            dataset_path=self.path, index=int(number), shard_name=raw.shard, file_names=(key,)
        )
        return raw.parts["json"], info

    def get_path(self) -> str:
        return self.path


class FileStoreWrapper(FileStore):
    """A store over another store (``_inner``): same files, same path, same media metadata;
    subclasses change how names resolve or how data decodes (Energon's base of both)."""

    def __init__(self, inner: FileStore) -> None:
        self._inner = inner

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner[key]

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner._get_raw(key)

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        return self._inner._decode_raw(data, **kwargs)

    def _cache_name(self, key: str) -> str:
        return self._inner._cache_name(key)

    def get_path(self) -> str:
        return self._inner.get_path()

    def get_media_metadata(self, key: str) -> Any:
        return self._inner.get_media_metadata(key)


class DecodeFileStore(FileStoreWrapper):
    """Another store's files decoded by ``decoder``, by the extension of their names.

    ``decoder`` is a :class:`~stoker.SampleDecoder`, or any object with Energon's
    ``decode(fname, data)`` (a :class:`~stoker.model.cache_pool.FileStoreDecoder`).
    """

    def __init__(self, inner: FileStore, *, decoder: SampleDecoder | FileStoreDecoder) -> None:
        super().__init__(inner)
        self.decoder = decoder

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        data, info = self._inner[key]
        return decode_file(self.decoder, key, data), info

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        inner = self._inner._decode_raw(data, **kwargs)
        return decode_file(self.decoder, str(kwargs["fname"]), inner)


class PrimaryFileStore(FileStoreWrapper):
    """A store where names starting with ``.`` are parts of the current sample (``".jpg"``)."""

    def __init__(self, inner: FileStore, current_key: str) -> None:
        super().__init__(inner)
        self._current_key = current_key

    def __getitem__(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner[self._resolve(key)]

    def _get_raw(self, key: str) -> tuple[Any, SourceInfo]:
        return self._inner._get_raw(self._resolve(key))

    def _decode_raw(self, data: Any, **kwargs: Any) -> Any:
        if "fname" in kwargs:
            kwargs = {**kwargs, "fname": self._resolve(str(kwargs["fname"]))}
        return self._inner._decode_raw(data, **kwargs)

    def _cache_name(self, key: str) -> str:
        return self._inner._cache_name(self._resolve(key))

    def get_media_metadata(self, key: str) -> Any:
        return self._inner.get_media_metadata(self._resolve(key))

    def _resolve(self, key: str) -> str:
        """``.mp4`` means the current sample's part ``mp4``."""
        return self._current_key + key if key.startswith(".") else key


def decode_file(decoder: Any, fname: str, data: Any) -> Any:
    """``decoder``'s decoding of one file: stoker's ``decode_file``, unless a subclass (or an
    Energon-style decoder) defines ``decode(fname, data)``."""
    own = getattr(type(decoder), "decode", None)
    stoker_decode = getattr(own, "__module__", "") == "stoker.pipeline.decode"
    if stoker_decode and hasattr(decoder, "decode_file"):
        return decoder.decode_file(fname, data)
    return decoder.decode(fname, data)


def open_aux(ref: AuxRef) -> FileStore:
    """The store for one aux reference of a metadataset."""
    return SystemFileStore(ref.path) if ref.filesystem else WebdatasetFileStore(ref.path)


def check_aux(ref: AuxRef) -> None:
    """Fail early (main process) with a :class:`ConfigError` if ``ref`` cannot be opened."""
    store = open_store(ref.path)
    if not ref.filesystem:
        _require_index(store, ref.path)
    elif not store.is_dir(""):
        raise ConfigError("the aux folder does not exist.", path=ref.path, hint="Fix the aux path.")


def _require_index(store: Store, path: str) -> None:
    if not (store.exists(INFO_JSON) or store.exists(INFO_YAML)):
        raise ConfigError(
            "an aux dataset must be a prepared dataset (with .nv-meta/index.sqlite); this "
            "folder is not one.",
            path=path,
            hint=f"Check the path, run `stoker prepare {path}`, or use filesystem:// for a "
            "plain folder.",
        )
    if not store.exists(INDEX_SQLITE):
        error = MissingSampleIndexError.for_dataset(path, "aux datasets")
        error.hint = f"{error.hint} Or use filesystem:// for a plain folder."
        raise error


def add_source_info(sample: Any, *infos: SourceInfo) -> Any:
    """Append ``infos`` to the ``__sources__`` of ``sample`` (a dict or a Sample); None: no-op."""
    if isinstance(sample, dict):
        sample["__sources__"] = (*(sample.get("__sources__") or ()), *infos)
    elif sample is not None and hasattr(sample, "__sources__"):
        sample.__sources__ = (*(sample.__sources__ or ()), *infos)
    return sample
