"""Where bytes come from: local folders today, S3-compatible object stores through the same API."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from stoker.storage.base import Store
from stoker.storage.local import LocalStore

__all__ = ["LocalStore", "Store", "open_store", "split_location"]

if TYPE_CHECKING:
    from stoker.storage.epath import EPath


def split_location(location: str) -> tuple[str, str]:
    """Split a file location into (parent, name): ``/a/b/c.jsonl`` -> (``/a/b``, ``c.jsonl``)."""
    location = location.rstrip("/")
    parent, _, name = location.rpartition("/")
    if "://" in location and "/" not in location.split("://", 1)[1]:
        return location, ""
    return (parent or ("/" if location.startswith("/") else ".")), name


def open_store(location: str | os.PathLike[str] | EPath) -> Store:
    """The store rooted at ``location``: a local folder or a ``file://``, ``s3://``, ``msc://``,
    ``dss://`` URL, or a URL of any other protocol fsspec knows (``gs://``, ``az://``, ...).

    ``s3://bucket/prefix`` is reached with the AWS chain (environment, profiles) overridden by
    the file ``STOKER_STORAGE_CONFIG`` names; ``msc://profile/path`` with a Multi-Storage Client
    profile (see :mod:`stoker.storage.config`); other protocols through fsspec
    (:mod:`stoker.storage.fsspec_store`); ``dss://NAME@VERSION/path`` lies under the folder
    ``NVDATASET_CACHE_DIR`` names, as :class:`~stoker.storage.epath.EPath` resolves it.

    Raises:
        ConfigError: a URL whose protocol is unknown, or whose package is not installed.

    Example:
        >>> store = open_store("coco-wds")
        >>> store.exists(".nv-meta/.info.json")
        True
    """
    location = str(location)  # a pathlib.Path or an EPath (whose str is its URL) as well
    if location.startswith("file://"):
        location = location[len("file://") :]
    if location.startswith("s3://"):
        from stoker.storage.config import load_storage_config
        from stoker.storage.s3 import S3Store, parse_s3_url

        bucket, prefix = parse_s3_url(location)
        return S3Store(location, load_storage_config().for_bucket(bucket), bucket, prefix)
    if location.startswith("msc://"):
        return _open_msc(location)
    if location.startswith("dss://"):
        return open_store(_dss_location(location))
    if "://" in location:
        from stoker.storage.fsspec_store import FsspecStore

        return FsspecStore(location)
    return LocalStore(os.path.expanduser(location))


def _dss_location(location: str) -> str:
    """``dss://name@version/path``: where EPath resolves it, under ``NVDATASET_CACHE_DIR``."""
    from stoker.errors import ConfigError
    from stoker.storage.epath import EPath

    try:
        return str(EPath(location).local_path())
    except ValueError as error:
        raise ConfigError(
            str(error),
            path=location,
            hint="Set NVDATASET_CACHE_DIR to the folder holding NAME/VERSION/ and write the path "
            "as dss://NAME@VERSION[/path].",
        ) from None


def _open_msc(location: str) -> Store:
    """``msc://profile/path``: the profile's base path joined with ``path``."""
    from stoker.errors import ConfigError
    from stoker.storage.msc import resolve_profile

    name, _, path = location[len("msc://") :].partition("/")
    profile = resolve_profile(name)
    if profile.kind == "file":
        return LocalStore(os.path.join(profile.base_path, path.strip("/")))
    from stoker.storage.s3 import S3Store

    full = "/".join(p for p in (profile.base_path.strip("/"), path.strip("/")) if p)
    bucket, _, prefix = full.partition("/")
    if not bucket or profile.settings is None:
        raise ConfigError(
            f"MSC profile {name!r} names no bucket.",
            path=location,
            hint=f"Give one in the profile's base_path, or in the path: msc://{name}/BUCKET/...",
        )
    return S3Store(location, profile.settings, bucket, prefix)
