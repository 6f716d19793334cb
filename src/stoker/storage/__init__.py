"""Where bytes come from: local folders today, S3-compatible object stores through the same API."""

from __future__ import annotations

import os

from stoker.errors import ConfigError
from stoker.storage.base import Store
from stoker.storage.local import LocalStore

__all__ = ["LocalStore", "Store", "open_store", "split_location"]


def split_location(location: str) -> tuple[str, str]:
    """Split a file location into (parent, name): ``/a/b/c.jsonl`` -> (``/a/b``, ``c.jsonl``)."""
    location = location.rstrip("/")
    parent, _, name = location.rpartition("/")
    if "://" in location and "/" not in location.split("://", 1)[1]:
        return location, ""
    return (parent or ("/" if location.startswith("/") else ".")), name


def open_store(location: str) -> Store:
    """The store rooted at ``location``: a local folder path or a ``file://`` URL.

    Example:
        >>> store = open_store("/data/my-dataset")
        >>> store.exists(".nv-meta/.info.json")  # doctest: +SKIP
        True
    """
    if location.startswith("file://"):
        location = location[len("file://") :]
    if "://" in location:
        scheme = location.split("://", 1)[0]
        raise ConfigError(
            f"URL scheme {scheme!r} is not supported yet.",
            path=location,
            hint="Use a local path; object stores (s3://) come with the storage extension.",
        )
    return LocalStore(os.path.expanduser(location))
