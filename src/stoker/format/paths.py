"""Shard paths named in ``.nv-meta`` stay inside the dataset folder, unless the user allows more.

A dataset folder may come from anyone; its ``.info.json`` and ``split.yaml`` name the shards the
loader reads. A name with a ``..`` component, an absolute path or a URL would make the loader
read files outside the dataset, so such names are refused unless allowed explicitly: by the
``allow_outside_paths=True`` argument of the functions that read these files, or for every
dataset by the environment variable ``STOKER_ALLOW_OUTSIDE_PATHS=1`` (read only here).

Example:
    >>> check_inside_root("shards/a.tar", "split.yaml")
    >>> outside_reason("../other/a.tar"), outside_reason("/data/a.tar")
    ("'..'", 'an absolute path')
"""

from __future__ import annotations

from collections.abc import Iterable

from stoker.errors import ConfigError
from stoker.storage.options import ALLOW_OUTSIDE_PATHS_ENV, env_allows_outside_paths

#: Set to 1 to let every dataset's metadata name shards outside its folder.
ALLOW_OUTSIDE_ENV = ALLOW_OUTSIDE_PATHS_ENV


def outside_paths_allowed(allow: bool | None = None) -> bool:
    """``allow`` if given, else whether ``STOKER_ALLOW_OUTSIDE_PATHS`` is ``1``/``true``/``yes``."""
    if allow is not None:
        return allow
    return env_allows_outside_paths()


def outside_reason(name: str) -> str | None:
    """Why the shard path ``name`` leads outside the dataset folder, or None if it does not."""
    if "://" in name:
        return "a URL"
    drive = len(name) > 2 and name[0].isalpha() and name[1] == ":" and name[2] in "/\\"
    if name.startswith(("/", "\\", "~")) or drive:
        return "an absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "'..'"
    return None


def check_inside_root(name: str, where: str, allow: bool | None = None) -> None:
    """Raise a :class:`ConfigError` naming ``where`` if ``name`` leads outside the dataset."""
    reason = outside_reason(name)
    if reason is None or outside_paths_allowed(allow):
        return
    raise ConfigError(
        f"the shard path {name!r} leads outside the dataset folder ({reason}).",
        path=where,
        hint="Move the shard into the dataset folder, or allow it explicitly with "
        f"allow_outside_paths=True or {ALLOW_OUTSIDE_ENV}=1 if you trust this dataset.",
    )


def check_all_inside_root(names: Iterable[str], where: str, allow: bool | None = None) -> None:
    """:func:`check_inside_root` for each of ``names`` (the env variable read once)."""
    allowed = outside_paths_allowed(allow)
    for name in names:
        check_inside_root(name, where, allowed)
