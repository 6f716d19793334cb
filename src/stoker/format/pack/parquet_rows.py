"""``pack`` from Parquet: each row of a folder of ``.parquet`` files (or of one file) is a sample.

A row's columns become its parts, named by column and what the value is: a Hugging Face
``Image``/``Audio`` struct or a binary column gives its bytes as ``<column>.<ext>`` (the
extension from the bytes' magic number: ``image.jpg``, ``image.png``; else ``png``/``wav`` for
media, ``bin`` for other bytes), a string ``<column>.txt``, anything else (numbers, lists,
structs) ``<column>.json``; a null value gives no part. Keys are the row numbers over the files
in path order, zero-padded (``00000042``), so shards keep the rows' order.

A field map for the packed shards names columns, as ``stoker prepare`` takes it for a Parquet
folder; :func:`part_field_map` turns it into part names (``{"image": "image.jpg,image.png"}``:
the first that a sample has).

The rows are held in memory while packing (their parts' bytes): pack a dataset larger than
memory a few files at a time (SRC may be one ``.parquet`` file; give each run its own
``--shard-prefix``).

Example:
    >>> parts = ["image.jpg", "image.png", "text.txt"]
    >>> part_field_map({"image": "image", "caption": "text"}, parts)
    {'image': 'image.jpg,image.png', 'caption': 'text.txt'}
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, NoReturn

from stoker.errors import ConfigError
from stoker.format.magic import DEFAULT_MEDIA_EXT, guess_extension
from stoker.format.pack.samples import Part, Sample
from stoker.format.parquet import SUFFIX, ParquetFile, is_parquet_dataset, media_columns
from stoker.format.parquet import parquet_names as _parquet_names
from stoker.storage import open_store

#: Minimum width of the zero-padded row-number keys (``00000042``).
KEY_WIDTH = 8


def is_parquet_source(src: str) -> bool:
    """Whether ``src`` is a ``.parquet`` file or a folder of them (a Parquet dataset)."""
    if os.path.isfile(src):
        return src.lower().endswith(SUFFIX)
    return os.path.isdir(src) and is_parquet_dataset(open_store(src))


def parquet_samples(src: str) -> list[Sample]:
    """The samples of the Parquet file or folder ``src``: one per row, in path and row order."""
    root, names = _files(src)
    store = open_store(root)
    rows: list[list[Part]] = []
    for name in names:
        file = ParquetFile(store, name)
        try:
            media = media_columns(file.file.schema_arrow)
            for group in range(len(file.group_starts) - 1):
                table = file.read_group(group, None)
                rows += [_parts(row, media) for row in table.to_pylist()]
        finally:
            file.close()
    width = max(KEY_WIDTH, len(str(len(rows) - 1)))
    return [Sample(f"{i:0{width}d}", tuple(parts)) for i, parts in enumerate(rows)]


def _files(src: str) -> tuple[str, list[str]]:
    """The folder of ``src``'s Parquet files and their names in it, in path order."""
    if os.path.isfile(src):
        return os.path.dirname(os.path.abspath(src)), [os.path.basename(src)]
    return src, _parquet_names(open_store(src))


def _parts(row: dict[str, Any], media: dict[str, str]) -> list[Part]:
    """A row's parts, sorted by name (see the module docstring)."""
    parts = []
    for column, value in row.items():
        if column in media and isinstance(value, dict):
            value = value.get("bytes")  # a path only (bytes not embedded): no part
        if value is None:
            continue
        if isinstance(value, bytes):
            kind = media.get(column)
            ext = guess_extension(value) or (DEFAULT_MEDIA_EXT.get(kind, "bin") if kind else "bin")
            data = value
        elif isinstance(value, str):
            ext, data = "txt", value.encode("utf-8")
        else:
            ext, data = "json", json.dumps(value, default=str).encode("utf-8")
        parts.append(Part(f"{column}.{ext}", "", 0, len(data), data))
    return sorted(parts, key=lambda p: p.name)


def parquet_columns(src: str) -> list[str]:
    """The columns of the Parquet file or folder ``src`` (its first file's, as a dataset's
    files all have them)."""
    root, names = _files(src)
    file = ParquetFile(open_store(root), names[0])
    try:
        return list(file.file.schema_arrow.names)
    finally:
        file.close()


def check_field_map(field_map: dict[str, str], columns: Iterable[str]) -> None:
    """Raise a :class:`ConfigError` where ``field_map`` names a column not in ``columns``."""
    known = set(columns)
    for field, column in field_map.items():
        if column not in known:
            _no_column(field, column, known)


def _no_column(field: str, column: str, known: Iterable[str]) -> NoReturn:
    raise ConfigError(
        f"--field-map: {field!r} names the column {column!r}, which the Parquet rows do not "
        f"have a value in (columns: {', '.join(sorted(known)) or 'none'}).",
        hint='Name a column of the Parquet files, e.g. \'{"image": "image", "caption": "text"}\'.',
    )


def part_field_map(field_map: dict[str, str], part_names: Iterable[str]) -> dict[str, str]:
    """``field_map`` (sample field -> Parquet column) as a field map of the packed shards
    (field -> the column's part names, comma-separated alternatives)."""
    names = sorted(set(part_names))
    by_column: dict[str, list[str]] = {}
    for name in names:
        by_column.setdefault(name.rpartition(".")[0], []).append(name)
    out = {}
    for field, column in field_map.items():
        parts = by_column.get(column)
        if not parts:
            _no_column(field, column, by_column)
        out[field] = ",".join(parts)
    return out


__all__ = [
    "KEY_WIDTH",
    "check_field_map",
    "is_parquet_source",
    "parquet_columns",
    "parquet_samples",
    "part_field_map",
]
