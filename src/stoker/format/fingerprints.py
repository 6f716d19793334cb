"""``.nv-meta/.stoker-shards.json``: a fingerprint per shard, written by ``prepare``.

Energon ignores this file; the files it reads stay byte-compatible. ``lint`` compares each
shard's fingerprint (size and a hash of its first and last sample headers, see
:func:`stoker.format.shard_scan.shard_fingerprint`) with the one stored when the dataset was
prepared, which finds shards that were swapped or replaced after ``prepare`` even when their
sizes and sample counts agree.

Example:
    >>> from stoker.storage import open_store
    >>> fingerprints = read_fingerprints(open_store("coco-wds"))
    >>> sorted(fingerprints)[:2]
    ['shard-000000.tar', 'shard-000001.tar']
"""

from __future__ import annotations

import json

from stoker.errors import StokerError
from stoker.format.meta import INDEX_UUID, META_DIR
from stoker.format.safe_load import load_yaml_or_json
from stoker.storage import Store

FINGERPRINTS = f"{META_DIR}/.stoker-shards.json"
_VERSION = 1


def encode_fingerprints(fingerprints: dict[str, str], index_uuid: str) -> bytes:
    """The file's content for ``fingerprints`` (shard name -> fingerprint), tied to the
    ``index.uuid`` written by the same ``prepare``."""
    data = {"version": _VERSION, "index_uuid": index_uuid, "fingerprints": fingerprints}
    return json.dumps(data, indent=1).encode()


def read_fingerprints(store: Store) -> dict[str, str]:
    """The stored fingerprints by shard; empty when there are none (e.g. prepared by Energon),
    when they belong to an earlier ``prepare`` (``index.uuid`` changed since, e.g. Energon
    prepared the dataset again) or the file is not one stoker can read (lint then checks
    without them)."""
    if not store.exists(FINGERPRINTS):
        return {}
    try:
        raw = load_yaml_or_json(store, FINGERPRINTS)
    except StokerError:
        return {}
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        return {}
    current = store.read_text(INDEX_UUID).strip() if store.exists(INDEX_UUID) else None
    if raw.get("index_uuid") != current:
        return {}
    prints = raw.get("fingerprints")
    if not isinstance(prints, dict):
        return {}
    return {str(k): v for k, v in prints.items() if isinstance(v, str)}
