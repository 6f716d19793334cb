"""Energon's in-memory description of a Parquet dataset (``megatron.energon.flavors.parquet.
prepare``, pull request #227): its files with their row counts, and the columns they share.

stoker reads the same facts from the files' footers itself
(:func:`stoker.format.parquet.scan_parquet`); this module serves Energon's value objects to
client code that builds or parses them.

Example:
    >>> layout = parse_parquet_layout(
    ...     {"version": 1, "columns": ["text"], "files": [{"rel_path": "a.parquet", "num_rows": 2}],
    ...      "total_rows": 2})
    >>> layout.files[0]
    ParquetFileEntry(rel_path='a.parquet', num_rows=2)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from stoker.errors import ConfigError


@dataclass(frozen=True)
class ParquetFileEntry:
    """One Parquet file: its path under the dataset's root, and its rows."""

    rel_path: str
    num_rows: int


@dataclass(frozen=True)
class ParquetLayout:
    """The files of a Parquet dataset, the columns they share, and their rows together."""

    version: int
    columns: list[str]
    files: list[ParquetFileEntry]
    total_rows: int


def parse_parquet_layout(raw: Mapping[str, Any]) -> ParquetLayout:
    """The layout a mapping (parsed JSON or YAML) describes; a missing or unknown key, or a
    value of the wrong type, raises ConfigError naming it."""
    values = _checked(raw, ParquetLayout, "layout")
    entries = values["files"]
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise ConfigError(f"layout.files must be a list of mappings, got {entries!r}.")
    files = [
        ParquetFileEntry(**_checked(e, ParquetFileEntry, f"layout.files[{i}]"))
        for i, e in enumerate(entries)
    ]
    columns = values["columns"]
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ConfigError(f"layout.columns must be a list of names, got {columns!r}.")
    return ParquetLayout(values["version"], list(columns), files, values["total_rows"])


def _checked(raw: Mapping[str, Any], kind: type, where: str) -> dict[str, Any]:
    names = [f.name for f in fields(kind)]
    missing, unknown = set(names) - set(raw), set(raw) - set(names)
    if missing or unknown:
        raise ConfigError(
            f"{where}: missing keys {sorted(missing)}, unknown keys {sorted(unknown)}.",
            hint=f"A {kind.__name__} has exactly the keys {names}.",
        )
    for name in names:
        if name in ("version", "num_rows", "total_rows") and (
            not isinstance(raw[name], int) or isinstance(raw[name], bool)
        ):
            raise ConfigError(f"{where}.{name} must be an integer, got {raw[name]!r}.")
    return dict(raw)
