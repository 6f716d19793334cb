"""The ``media_metadata`` and ``media_filters`` tables of ``index.sqlite``, in Energon's schema::

    media_metadata(entry_key TEXT PRIMARY KEY, metadata_type TEXT NOT NULL,
                   metadata_json TEXT NOT NULL)
    media_filters(filter_id INTEGER PRIMARY KEY AUTOINCREMENT, strategy TEXT NOT NULL,
                  patterns TEXT, created_at_utc TEXT DEFAULT CURRENT_TIMESTAMP,
                  UNIQUE(strategy, patterns))

``entry_key`` is the tar member name (sample key + ``.`` + part, e.g. ``clip_007.mp4``);
``metadata_type`` is ``av`` or ``image``; ``metadata_json`` holds the known fields (see
:mod:`stoker.media.metadata`). Either library reads what the other wrote. ``created_at_utc`` is
the time of writing, or ``SOURCE_DATE_EPOCH`` when that is set (for byte-identical rebuilds).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from stoker.storage.options import env_source_date_epoch

MEDIA_METADATA_DDL = """
CREATE TABLE IF NOT EXISTS media_metadata (
    entry_key TEXT PRIMARY KEY,
    metadata_type TEXT NOT NULL,
    metadata_json TEXT NOT NULL
)"""
MEDIA_FILTERS_DDL = """
CREATE TABLE IF NOT EXISTS media_filters (
    filter_id INTEGER PRIMARY KEY AUTOINCREMENT,
    strategy TEXT NOT NULL,
    patterns TEXT,
    created_at_utc TEXT DEFAULT CURRENT_TIMESTAMP,
    UNIQUE(strategy, patterns)
)"""
#: (entry key, metadata type, metadata JSON)
MediaRow = tuple[str, str, str]


class MediaMetadataWriter:
    """Replaces the media tables of an index file in one transaction; nothing is kept on abort.

    Example:
        >>> writer = MediaMetadataWriter(":memory:")
        >>> writer.add([("a.jpg", "image", '{"width":8}')])
        >>> writer.commit(strategy="EXTENSION", patterns="")
    """

    def __init__(self, local_path: str) -> None:
        self._db = sqlite3.connect(local_path, isolation_level=None)
        self._db.execute("BEGIN")
        self._db.execute("DROP TABLE IF EXISTS media_metadata")
        self._db.execute("DROP TABLE IF EXISTS media_filters")
        self._db.execute(MEDIA_METADATA_DDL)
        self._db.execute(MEDIA_FILTERS_DDL)
        self._closed = False

    def add(self, rows: Iterable[MediaRow]) -> None:
        """Insert rows; a repeated entry key keeps the last (as Energon's INSERT OR REPLACE)."""
        self._db.executemany("INSERT OR REPLACE INTO media_metadata VALUES (?, ?, ?)", rows)

    def commit(self, *, strategy: str, patterns: str) -> None:
        """Record the filter that selected the media, commit and close."""
        epoch = env_source_date_epoch()
        if epoch is not None:  # reproducible builds: a fixed time instead of now
            self._db.execute(
                "INSERT OR IGNORE INTO media_filters (strategy, patterns, created_at_utc) "
                "VALUES (?, ?, datetime(?, 'unixepoch'))",
                (strategy, patterns, epoch),
            )
        else:
            self._db.execute(
                "INSERT OR IGNORE INTO media_filters (strategy, patterns) VALUES (?, ?)",
                (strategy, patterns),
            )
        self._db.execute("COMMIT")
        self._db.close()
        self._closed = True

    def abort(self) -> None:
        """Roll back and close: the index file keeps its old tables (no-op once committed)."""
        if self._closed:
            return
        self._db.execute("ROLLBACK")
        self._db.close()
        self._closed = True


class MediaMetadataReader:
    """Read-only lookups of media records (opened immutable: safe in many processes)."""

    def __init__(self, local_path: str) -> None:
        self._db = sqlite3.connect(f"file:{local_path}?mode=ro&immutable=1", uri=True)

    def has_table(self) -> bool:
        """Whether the index holds media metadata at all."""
        row = self._db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='media_metadata'"
        ).fetchone()
        return row is not None

    def get(self, entry_key: str) -> tuple[str, str] | None:
        """``(metadata_type, metadata_json)`` of the member ``entry_key``, or None."""
        row = self._db.execute(
            "SELECT metadata_type, metadata_json FROM media_metadata WHERE entry_key = ?",
            (entry_key,),
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM media_metadata").fetchone()[0])

    def close(self) -> None:
        self._db.close()
