"""The header of a previewed split: samples, shards, sample type, field map, media metadata.

Example:
    >>> from stoker.sources.load import load_source
    >>> header_info(load_source("coco-wds", split_part="train"), "CaptioningSample")
    ... # doctest: +NORMALIZE_WHITESPACE
    {'samples': '40', 'shards': '4', 'sample type': 'CaptioningSample',
     'field map': 'image: jpg, caption: txt',
     'media metadata': 'not prepared (run `stoker prepare-media`)'}
"""

from __future__ import annotations

import sqlite3

from stoker.errors import StokerError
from stoker.format.media_metadata import MediaMetadataReader
from stoker.format.meta import INDEX_SQLITE
from stoker.sources.source import DataSource
from stoker.storage import open_store


def header_info(source: DataSource, sample_type: str) -> dict[str, str]:
    """What the page's header says about ``source`` (all values are display text)."""
    info = {
        "samples": f"{source.total:,}",
        "shards": f"{len(source.shards):,}",
        "sample type": sample_type,
    }
    field_map = source.config.field_map
    if field_map:
        info["field map"] = ", ".join(
            f"{name}: {','.join(_access(a.part, a.path) for a in alts)}"
            for name, alts in field_map.items()
        )
    if source.subflavors:
        info["subflavors"] = ", ".join(f"{k}={v}" for k, v in source.subflavors.items())
    if not source.jsonl:
        info["media metadata"] = media_status(source.path)
    return info


def media_status(path: str) -> str:
    """``N records`` when ``stoker prepare-media`` stored media metadata, else why not."""
    try:
        store = open_store(path)
        local = store.cached_local_path(INDEX_SQLITE) if store.exists(INDEX_SQLITE) else None
        if local is None:
            return "not prepared (no index.sqlite)"
        reader = MediaMetadataReader(local)
        try:
            if not reader.has_table():
                return "not prepared (run `stoker prepare-media`)"
            return f"{reader.count():,} records"
        finally:
            reader.close()
    except (StokerError, sqlite3.Error, OSError) as e:
        return f"unknown ({type(e).__name__})"


def _access(part: str, path: tuple[str, ...]) -> str:
    return part + "".join(f"[{p}]" for p in path)
