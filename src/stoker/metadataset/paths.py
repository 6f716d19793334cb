"""Paths in a metadataset: relative to the YAML's folder unless absolute or a URL.

Example:
    >>> resolve_path("/cfg", "../data/coco")
    '/data/coco'
    >>> resolve_path("s3://bucket/cfg", "./coco")
    's3://bucket/cfg/coco'
    >>> resolve_path("/cfg", "s3://bucket/coyo")
    's3://bucket/coyo'
"""

from __future__ import annotations

import os
import posixpath
import re

_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<rest>.*)$", re.IGNORECASE)
YAML_SUFFIXES = (".yaml", ".yml")


def url_scheme(path: str) -> str | None:
    """The scheme of a URL-shaped path (``s3`` for ``s3://b/k``), else None."""
    match = _URL.match(path)
    return match.group("scheme") if match else None


def absolute(path: str) -> str:
    """``path`` made absolute: local paths against the working folder, URLs as they are."""
    if url_scheme(path) is not None:
        return path
    return os.path.abspath(os.path.expanduser(path))


def parent(path: str) -> str:
    """The folder holding the file ``path`` (a local path or a URL)."""
    match = _URL.match(path)
    if match:
        return f"{match.group('scheme')}://{posixpath.dirname(match.group('rest'))}"
    return os.path.dirname(path)


def resolve_path(base: str, path: str) -> str:
    """``path`` as written in a metadataset whose folder is ``base``."""
    if url_scheme(path) is not None:
        return path
    if os.path.isabs(path):
        return os.path.normpath(path)
    match = _URL.match(base)
    if match:
        joined = posixpath.normpath(posixpath.join(match.group("rest"), path))
        return f"{match.group('scheme')}://{joined}"
    return os.path.normpath(os.path.join(base, path))


def is_yaml(path: str) -> bool:
    """Whether ``path`` names a YAML file (a nested metadataset rather than a dataset)."""
    return path.lower().endswith(YAML_SUFFIXES)
