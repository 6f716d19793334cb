"""Parquet datasets: a folder of ``.parquet`` files where a sample is a row.

A folder (local or on an object store) with ``.parquet`` files and no ``.nv-meta/.info.json`` is
a Parquet dataset; it needs no ``stoker prepare``, which only adds a ``dataset.yaml`` for typed
samples. Files are taken in path order; Hugging Face's ``{split}-NNNNN-of-NNNNN.parquet`` names
give the splits (otherwise every file is ``train``).

Random access goes through each file's row groups: the footer lists them, so a row's place is
(file, row group, row in the group), and only the row groups a read touches are read, of only
the columns asked for (:class:`ParquetFile`). A column holding Hugging Face's ``Image`` (or
``Audio``) struct ``{bytes, path}`` is an *media column*: its ``bytes`` are decoded as a tar
part of that type would be.

Example:
    >>> from stoker.storage import open_store
    >>> layout = scan_parquet(open_store("laion"), "train")
    >>> layout.files[:1], int(layout.rows.sum())
    (('data/train-00000-of-00002.parquet',), 24)
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError, FormatError, require
from stoker.format.meta import INFO_JSON, INFO_YAML
from stoker.storage import Store

SUFFIX = ".parquet"
#: Hugging Face's file names: ``data/train-00000-of-00012.parquet`` is split ``train``.
HF_SPLIT = re.compile(r"(?:^|/)(?P<split>[^/]+?)-\d{5}-of-\d{5}\.parquet$")
_NEEDED_FOR = "reading Parquet datasets"


def is_parquet_dataset(store: Store) -> bool:
    """Whether ``store``'s root is a Parquet dataset (Parquet files, no tar ``.info`` file)."""
    if store.exists(INFO_JSON) or store.exists(INFO_YAML) or not store.is_dir(""):
        return False
    return any(name.endswith(SUFFIX) for name in _visible(store))


def _visible(store: Store) -> list[str]:
    return [n for n in store.list_files() if not any(p.startswith(".") for p in n.split("/"))]


def parquet_names(store: Store) -> list[str]:
    """Every Parquet file of the dataset (hidden folders left out), in path order."""
    return sorted((n for n in _visible(store) if n.endswith(SUFFIX)), key=lambda n: n.split("/"))


def split_files(store: Store, split: str) -> list[str]:
    """The Parquet files of ``split``, in path order (see the module doc for the names)."""
    names = parquet_names(store)
    splits = {n: m.group("split") for n in names if (m := HF_SPLIT.search(n))}
    if splits:
        files = [n for n in names if splits.get(n) == split]
        if not files:
            found = ", ".join(sorted(set(splits.values())))
            raise ConfigError(
                f"no Parquet files of split {split!r} (file names give the splits {found}).",
                path=store.url(""),
                hint=f"Load one of: {found}.",
            )
        return files
    if split != "train":
        raise ConfigError(
            f"no Parquet files of split {split!r}: the file names name no splits, so every "
            "file is 'train'.",
            path=store.url(""),
            hint="Name the files {split}-00000-of-00001.parquet (Hugging Face's layout), or "
            "load split 'train'.",
        )
    return names


@dataclass(frozen=True)
class ParquetLayout:
    """The files of one split, their rows, and the columns all of them have."""

    files: tuple[str, ...]
    rows: npt.NDArray[np.int64]
    columns: tuple[str, ...]
    #: Columns holding Hugging Face ``Image``/``Audio`` structs: name -> ``image``/``audio``.
    media: dict[str, str]


def scan_parquet(store: Store, split: str, files: list[str] | None = None) -> ParquetLayout:
    """Read the footer of each file of ``split`` (or of ``files``, names in ``store``, when
    given): rows and columns (no data is read)."""
    if files is None:
        files = split_files(store, split)
    rows = np.zeros(len(files), np.int64)
    columns: tuple[str, ...] = ()
    media: dict[str, str] = {}
    for i, name in enumerate(files):
        meta = ParquetFile(store, name).file
        rows[i] = meta.metadata.num_rows
        schema = meta.schema_arrow
        if i == 0:
            columns, media = tuple(schema.names), media_columns(schema)
        elif tuple(schema.names) != columns:
            raise FormatError(
                f"the file's columns {list(schema.names)} differ from the first file's "
                f"{list(columns)}.",
                path=store.url(name),
                hint="Every Parquet file of a split must have the same columns.",
            )
    return ParquetLayout(tuple(files), rows, columns, media)


def media_columns(schema: Any) -> dict[str, str]:
    """Columns that hold Hugging Face ``Image``/``Audio`` values (``{bytes, path}`` structs),
    from the schema's ``huggingface`` metadata, else from the struct's shape (images)."""
    pa = require("pyarrow", _NEEDED_FOR)
    features: dict[str, Any] = {}
    raw = (schema.metadata or {}).get(b"huggingface")
    if raw:
        try:
            features = json.loads(raw).get("info", {}).get("features", {}) or {}
        except (ValueError, AttributeError):
            features = {}
    out: dict[str, str] = {}
    for field in schema:
        kind = features.get(field.name, {})
        kind = kind.get("_type") if isinstance(kind, dict) else None
        if kind in ("Image", "Audio"):
            out[field.name] = str(kind).lower()
        elif pa.types.is_struct(field.type) and {f.name for f in field.type} == {"bytes", "path"}:
            out[field.name] = "image"
    return out


class ParquetFile:
    """One Parquet file opened for random access by row group.

    Local files are opened by path (pyarrow reads them with its own I/O); files on an object
    store through the store's file object, which reads byte ranges: the footer first, then the
    column chunks of the row groups asked for.
    """

    def __init__(self, store: Store, name: str) -> None:
        pq = require("pyarrow.parquet", _NEEDED_FOR)
        self.store, self.name = store, name
        local = store.local_path(name)
        self._handle = None if local is not None else _RangeFile(store, name)
        cached = None if self._handle is None else _cached_footer(store, name, self._handle.length)
        try:
            self.file: Any = pq.ParquetFile(
                local if local is not None else self._handle, memory_map=False, metadata=cached
            )
            if self._handle is not None and cached is None:
                _cache_footer(store, name, self._handle.length, self.file.metadata)
        except Exception as e:  # pyarrow's ArrowInvalid and OSError
            self.close()
            raise FormatError(
                f"not a readable Parquet file ({e}).",
                path=store.url(name),
                hint="Run `stoker lint` on the dataset; rewrite or remove the file.",
            ) from None
        meta = self.file.metadata
        counts = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        #: First row of each row group, then the number of rows (like a .tar.idx).
        self.group_starts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))

    def group_of(self, row: int) -> int:
        """The row group holding ``row``."""
        return int(np.searchsorted(self.group_starts, row, side="right")) - 1

    def read_group(self, group: int, columns: list[str] | None) -> Any:
        """Row group ``group`` (a ``pyarrow.Table``) of only ``columns`` (None: all)."""
        try:
            # One thread: the loader's workers are the parallelism; Arrow's pool beside them
            # only waits for cores (a group read took 2-15 ms with it, 1 ms without, loaded).
            return self.file.read_row_group(group, columns=columns, use_threads=False)
        except Exception as e:
            raise FormatError(
                f"row group {group} cannot be read ({' '.join(str(e).split())}).",
                path=self.store.url(self.name),
                offset=self.group_offset(group),
                hint="The file is damaged; rewrite it, or exclude it from the dataset.",
            ) from None

    def group_offset(self, group: int) -> int:
        """The byte offset of row group ``group``'s first page (its first column chunk's
        dictionary page, else data page; pyarrow's ``file_offset`` is 0 in current writers)."""
        first = self.file.metadata.row_group(group).column(0)
        offset = first.dictionary_page_offset if first.has_dictionary_page else None
        return int(first.data_page_offset if offset is None else offset)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _footer_key(store: Store, name: str, size: int) -> tuple[str, str]:
    """The metadata cache's (URL, version) of a remote file's footer."""
    return f"{store.url(name)}#parquet-footer", f"{size}:{store.modified(name)}"


def _cached_footer(store: Store, name: str, size: int) -> Any:
    """The footer of a remote file from the local metadata cache (None: not cached), so that
    each worker opening the file reads only the row groups it needs from the store."""
    from stoker.storage.cache import default_cache, read_entry

    cache = default_cache()
    hit = None if cache is None else cache.get(*_footer_key(store, name, size))
    data = None if hit is None else read_entry(hit)
    if data is None:
        return None
    pa, pq = require("pyarrow", _NEEDED_FOR), require("pyarrow.parquet", _NEEDED_FOR)
    try:
        return pq.read_metadata(pa.BufferReader(data))
    except Exception:
        return None  # a damaged entry: read the footer from the store again


def _cache_footer(store: Store, name: str, size: int, metadata: Any) -> None:
    from stoker.storage.cache import default_cache

    cache = default_cache()
    if cache is None:
        return
    pa = require("pyarrow", _NEEDED_FOR)
    sink = pa.BufferOutputStream()
    metadata.write_metadata_file(sink)
    cache.put_bytes(*_footer_key(store, name, size), sink.getvalue().to_pybytes())


class _RangeFile(io.RawIOBase):
    """A remote file for pyarrow: each ``read`` is one ranged read of exactly the bytes asked
    for (pyarrow asks for the footer, then for each column chunk it needs), with no read-ahead
    that would fetch the columns left out."""

    def __init__(self, store: Store, name: str) -> None:
        super().__init__()
        self.store, self.name = store, name
        self.length = store.size(name)
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + offset)
        return self.position

    def read(self, size: int = -1) -> bytes:
        end = self.length if size is None or size < 0 else min(self.length, self.position + size)
        if end <= self.position:
            return b""
        data = self.store.read_range(self.name, self.position, end - self.position)
        self.position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


@dataclass(frozen=True)
class ParquetPrepareReport:
    """What ``stoker prepare`` did to a Parquet folder."""

    path: str
    files: int
    rows: int
    splits: dict[str, int]
    dataset_yaml: str | None


def prepare_parquet(
    path: str, dataset_yaml: dict[str, Any] | None, dataset_yaml_name: str
) -> ParquetPrepareReport:
    """Check a Parquet folder's files (footers) and write its ``dataset.yaml`` if given.

    The field map's parts are the columns; a name that no file has is refused before anything
    is written. The dataset itself needs nothing else: loading reads the footers.
    """
    from stoker.format.dataset_config import parse_dataset_config
    from stoker.format.meta import META_DIR
    from stoker.format.prepare_lock import PrepareLock
    from stoker.storage import open_store

    store = open_store(path)
    names = parquet_names(store)
    found = {m.group("split") for n in names if (m := HF_SPLIT.search(n))} or {"train"}
    splits = {split: int(scan_parquet(store, split).rows.sum()) for split in sorted(found)}
    written = None
    with PrepareLock(store):
        if dataset_yaml is not None:
            where = store.url(f"{META_DIR}/{dataset_yaml_name}")
            config = parse_dataset_config(dataset_yaml, where)
            columns = set(scan_parquet(store, sorted(found)[0]).columns)
            missing = sorted(config.parts_used() - columns)
            if missing:
                raise ConfigError(
                    f"the field map names column {missing[0]!r}, which the Parquet files lack.",
                    path=where,
                    hint=f"Columns: {', '.join(sorted(columns))}.",
                )
            import yaml

            written = f"{META_DIR}/{dataset_yaml_name}"
            tmp = f"{written}.stoker-tmp-parquet"
            store.write_bytes(tmp, yaml.safe_dump(dataset_yaml, sort_keys=False).encode())
            store.publish(tmp, written)
    return ParquetPrepareReport(path, len(names), sum(splits.values()), splits, written)
