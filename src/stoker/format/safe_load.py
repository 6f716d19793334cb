"""Bounded parsing of the JSON and YAML metadata files read from a dataset folder.

A dataset folder may come from anywhere, so its metadata (``.info.json``, ``split.yaml``,
``dataset.yaml``) is checked before and while it is parsed: a size limit, UTF-8 text, and a nesting
depth that Python can handle. Every failure is a stoker error that names the file.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from stoker.errors import ConfigError, FormatError
from stoker.storage import Store

#: The largest metadata file stoker parses (``.info.json`` of a million shards is ~60 MiB).
MAX_METADATA_BYTES = 256 * 1024 * 1024

_FIX_HINT = "Fix the file, or re-create it with `stoker prepare --force-overwrite`."


def load_yaml_or_json(store: Store, path: str) -> Any:
    """Parse the YAML (or, for ``*.json``, JSON) file ``path`` of ``store``, within limits.

    Raises:
        FormatError: the file is too large, not UTF-8, or nested too deeply.
        ConfigError: the file is not valid JSON or YAML.

    Example:
        >>> from stoker.storage import open_store
        >>> split = load_yaml_or_json(open_store("coco-wds"), ".nv-meta/split.yaml")
        >>> split["split_parts"]["val"]
        ['shard-000004.tar']
    """
    where = store.url(path)
    size = store.size(path)
    if size > MAX_METADATA_BYTES:
        raise FormatError(
            f"the metadata file is {size} bytes, more than stoker reads "
            f"({MAX_METADATA_BYTES} bytes).",
            path=where,
            hint=_FIX_HINT,
        )
    try:
        text = store.read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(
            f"the metadata file is not UTF-8 text (bad byte at position {e.start}).",
            path=where,
            hint=_FIX_HINT,
        ) from None
    kind = "JSON" if path.endswith(".json") else "YAML"
    try:
        return json.loads(text) if kind == "JSON" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise ConfigError(
            f"invalid {kind}: {e}", path=where, hint="Fix the syntax of the file."
        ) from None
    except (RecursionError, MemoryError):
        raise FormatError(
            f"the {kind} is nested too deeply (or too large) to read.",
            path=where,
            hint=_FIX_HINT,
        ) from None
