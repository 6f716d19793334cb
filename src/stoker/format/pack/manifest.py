"""The record of what ``pack`` wrote into its output folder, so that overwriting removes only that.

``OUT/.stoker-pack-manifest.json`` lists the shard file names (plain names directly in ``OUT``)
that ``pack`` published there. ``--force-overwrite`` deletes those and nothing else: a tar that
another tool, another dataset or the user put into ``OUT`` is never removed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from stoker.errors import ConfigError

#: File name of the manifest inside the output folder.
MANIFEST = ".stoker-pack-manifest.json"
_VERSION = 1


def _bad(path: str, problem: str) -> ConfigError:
    return ConfigError(
        f"the pack manifest is not one stoker wrote: {problem}.",
        path=path,
        hint="Remove the old shards yourself and delete the manifest, or choose another output "
        "folder.",
    )


def _plain_shard_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name.endswith(".tar")
        and not name.startswith(".")
        and "/" not in name
        and os.sep not in name
        and "\0" not in name
    )


def read_manifest(out: str) -> list[str] | None:
    """The shard names ``pack`` recorded in ``out`` (``None`` if there is no manifest).

    Example:
        >>> read_manifest("coco-wds")[:2]
        ['shard-000000.tar', 'shard-000001.tar']
        >>> read_manifest("raw") is None
        True
    """
    path = os.path.join(out, MANIFEST)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _bad(path, f"it cannot be read as JSON ({type(e).__name__})") from None
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        raise _bad(path, f"expected a mapping with version {_VERSION}")
    shards = raw.get("shards")
    if not isinstance(shards, list) or not all(_plain_shard_name(n) for n in shards):
        raise _bad(path, "'shards' must list plain .tar file names in the folder")
    return [str(name) for name in shards]


def write_manifest(out: str, shards: Iterable[str]) -> None:
    """Record ``shards`` (names in ``out``) atomically, replacing any earlier manifest."""
    path = os.path.join(out, MANIFEST)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"version": _VERSION, "tool": "stoker pack", "shards": sorted(shards)}, f)
        f.write("\n")
    os.replace(tmp, path)
