"""Listing, globbing and stat for :class:`~stoker.storage.epath.EPath`, local and remote.

Patterns are ``/``-separated; a part matches one name with ``fnmatch`` rules (``*``, ``?``,
``[...]``), and a ``**`` part matches any number of folders, none included. Only files match.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from stoker.storage.base import Store

_MAGIC = frozenset("*?[")


@dataclass(frozen=True)
class PathStat:
    """What ``EPath.stat()`` returns (the fields of Multi-Storage Client's ``ObjectMetadata``
    that Energon reads)."""

    key: str
    content_length: int
    last_modified: datetime | None
    type: str = "file"


def local_stat(path: str) -> PathStat:
    st = os.stat(path)
    kind = "directory" if os.path.isdir(path) else "file"
    stamp = datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)
    return PathStat(path, st.st_size, stamp, kind)


def remote_stat(store: Store, url: str) -> PathStat:
    if not store.exists(""):
        if store.is_dir(""):
            return PathStat(url, 0, None, "directory")
        raise FileNotFoundError(url)
    stamp = store.modified("")
    when = datetime.fromtimestamp(stamp, tz=timezone.utc) if stamp is not None else None
    return PathStat(url, store.size(""), when, "file")


def match_parts(names: list[str], parts: list[str]) -> bool:
    """Whether the path parts ``names`` match the pattern parts ``parts``."""
    if not parts:
        return not names
    if parts[0] == "**":
        return any(match_parts(names[i:], parts[1:]) for i in range(len(names) + 1))
    return (
        bool(names)
        and fnmatch.fnmatchcase(names[0], parts[0])
        and match_parts(names[1:], parts[1:])
    )


def glob_files(files: list[str], parts: list[str]) -> list[str]:
    """The relative file names among ``files`` that match ``parts``."""
    return [f for f in files if match_parts(f.split("/"), parts)]


def local_glob(root: str, parts: list[str]) -> list[str]:
    """Relative names of the files under the folder ``root`` matching ``parts``, sorted."""
    found: set[str] = set()
    for rel in _walk_matches(root, "", parts, set()):
        found.add(rel)
    return sorted(found)


def _walk_matches(root: str, rel: str, parts: list[str], seen: set[str]) -> Iterator[str]:
    """Descend only where the pattern can still match (``**`` follows symlinks, once each)."""
    here = os.path.join(root, rel) if rel else root
    if not parts:
        if rel and os.path.isfile(here):
            yield rel
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        real = os.path.realpath(here)
        if real in seen:  # a symlink loop
            return
        yield from _walk_matches(root, rel, rest, seen | {real})
        for name in _listdir(here):
            if os.path.isdir(os.path.join(here, name)):
                yield from _walk_matches(root, _join(rel, name), parts, seen | {real})
        return
    if not _MAGIC & set(head):
        if os.path.exists(os.path.join(here, head)):
            yield from _walk_matches(root, _join(rel, head), rest, seen)
        return
    for name in _listdir(here):
        if fnmatch.fnmatchcase(name, head):
            yield from _walk_matches(root, _join(rel, name), rest, seen)


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:  # not a folder, or unreadable: nothing under it
        return []


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name
