"""The join index: for each sample of a primary split, where the sample with the same key is in
each joined (partner) split.

Keys come from each dataset's ``index.sqlite`` in one query and are matched with numpy (sort +
``searchsorted``): two datasets of 10^6 samples join in about a second. A location is a sample's
global index in its split (shard position x count, plus index in the shard), or -1 for none.
The index is cached as ``<yaml>.cache/stoker_join_<key>.npz`` (the folder Energon keeps its join
indexes in, next to the metadataset); the key (:func:`cache_key`) hashes every input that
changes the index.

Example:
    >>> keys = KeyTable(["b", "a", "c"], np.array([0, 1, 2]))
    >>> match(keys, 3, KeyTable(["c", "a"], np.array([0, 1]))).tolist()
    [-1, 1, 0]
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError, MissingSampleIndexError
from stoker.format.meta import INDEX_SQLITE, INDEX_UUID, INFO_JSON, META_DIR, read_info
from stoker.storage import Store

#: Bump when the layout of the cached file changes.
FORMAT_VERSION = "1"
#: The cache folder is the YAML's path plus this suffix (as Energon's); files carry the prefix.
CACHE_SUFFIX = ".cache"
CACHE_PREFIX = "stoker_join_"
Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True)
class KeyTable:
    """Sample keys of one split and each one's global index in that split (unordered)."""

    keys: list[str]
    positions: Int64Array


def read_key_table(
    store: Store, shards: Sequence[str], counts: Int64Array, excluded: Int64Array
) -> KeyTable:
    """The keys of the split made of ``shards`` (in order), without ``excluded`` samples.

    ``tar_file_id`` in ``index.sqlite`` is a shard's position in ``.info.json``; samples of shards
    outside the split are dropped.
    """
    info_names = list(read_info(store).shard_counts)
    split_pos = {name: i for i, name in enumerate(shards)}
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    # info position -> first global index of that shard in the split (-1: not in the split)
    first = np.array(
        [starts[split_pos[n]] if n in split_pos else -1 for n in info_names] + [-1], np.int64
    )
    with _local_db(store) as path:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            keys, tar_ids, indices = _read_rows(db)
        finally:
            db.close()
    base = first[np.clip(tar_ids, -1, len(info_names))]
    keep = base >= 0
    positions = (base + indices)[keep]
    if len(positions) != int(counts.sum()):
        raise FormatError(
            f"index.sqlite lists {len(positions)} samples of the split, .info.json "
            f"{int(counts.sum())}.",
            path=store.url(INDEX_SQLITE),
            hint="The dataset changed since it was prepared; run `stoker prepare` on it again.",
        )
    if len(excluded):
        keep &= ~np.isin(base + indices, excluded)
        positions = (base + indices)[keep]
    return KeyTable(list(itertools.compress(keys, keep.tolist())), positions)


def _read_rows(db: sqlite3.Connection) -> tuple[list[str], Int64Array, Int64Array]:
    """(keys, tar_file_ids, sample indices) in rowid order; one string per column is much
    faster than a Python tuple per row."""
    count = int(db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    if count == 0:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    (text,) = db.execute(
        "SELECT group_concat(sample_key, char(10)) FROM "
        "(SELECT sample_key FROM samples ORDER BY rowid)"
    ).fetchone()
    keys = text.split("\n")
    if len(keys) != count:  # a key with a newline: the slow way
        rows = db.execute("SELECT sample_key FROM samples ORDER BY rowid").fetchall()
        keys = [str(row[0]) for row in rows]
    (text,) = db.execute(
        "SELECT group_concat(tar_file_id * 4294967296 + sample_index) FROM "
        "(SELECT tar_file_id, sample_index FROM samples ORDER BY rowid)"
    ).fetchone()
    packed = np.array(text.split(","), dtype=np.int64)
    return keys, packed >> 32, packed & 0xFFFFFFFF


def match(primary: KeyTable, total: int, partner: KeyTable) -> Int64Array:
    """For each primary global index ``0 <= i < total``: the partner's global index, or -1.

    Matches 64-bit hashes of the keys (both sides sorted, so lookups run in order), then checks
    every matched pair's keys; on a hash collision it matches the strings themselves.
    """
    out = np.full(total, -1, dtype=np.int64)
    if not primary.keys or not partner.keys:
        return out
    found_p, found_q = _match_sorted(_hashes(primary.keys), _hashes(partner.keys))
    if len(found_p) and _pick(primary.keys, found_p) != _pick(partner.keys, found_q):
        found_p, found_q = _match_sorted(np.array(primary.keys), np.array(partner.keys))
    out[primary.positions[found_p]] = partner.positions[found_q]
    return out


def _pick(keys: list[str], rows: Int64Array) -> list[str]:
    return list(map(keys.__getitem__, rows.tolist()))


def _hashes(keys: list[str]) -> Int64Array:
    return np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))


def _match_sorted(p: npt.NDArray[Any], q: npt.NDArray[Any]) -> tuple[Int64Array, Int64Array]:
    """Rows of ``p`` and ``q`` with equal values (values of ``q`` are unique)."""
    order_q = np.argsort(q, kind="stable")
    sorted_q = q[order_q]
    order_p = np.argsort(p, kind="stable")
    at = np.minimum(np.searchsorted(sorted_q, p[order_p]), len(sorted_q) - 1)
    found = sorted_q[at] == p[order_p]
    return order_p[found], order_q[at[found]]


def dataset_fingerprint(store: Store, split_config: str) -> bytes:
    """What identifies a prepared dataset's content and split: ``index.uuid``, ``.info.json``
    and the split config (shards, excludes)."""
    digest = hashlib.sha256()
    for name in (INDEX_UUID, INFO_JSON, f"{META_DIR}/{split_config}"):
        digest.update(name.encode() + b"\0")
        digest.update(store.read_bytes(name) if store.exists(name) else b"<missing>")
        digest.update(b"\0")
    return digest.digest()


def cache_key(parts: Sequence[tuple[str, str, str, bytes]]) -> str:
    """A short hash of (path, split part, split config, fingerprint) of every joined dataset."""
    digest = hashlib.sha256(f"stoker-join-v{FORMAT_VERSION}\0".encode())
    for path, split_part, split_config, fingerprint in parts:
        digest.update(f"{path}\0{split_part}\0{split_config}\0".encode() + fingerprint)
    return digest.hexdigest()[:24]


def cache_path(yaml_path: str, key: str) -> str:
    """``<yaml>.cache/stoker_join_<key>.npz``."""
    return os.path.join(yaml_path + CACHE_SUFFIX, f"{CACHE_PREFIX}{key}.npz")


def cached_indexes(yaml_path: str) -> list[str]:
    """The join index files stoker cached for the YAML at ``yaml_path`` (sorted)."""
    folder = yaml_path + CACHE_SUFFIX
    if not os.path.isdir(folder):
        return []
    names = (n for n in os.listdir(folder) if n.startswith(CACHE_PREFIX) and n.endswith(".npz"))
    return sorted(os.path.join(folder, n) for n in names)


def save_index(path: str, key: str, locations: Int64Array) -> None:
    """Write ``locations`` (partners x primary samples) atomically (temporary file + rename)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".npz.tmp", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, key=np.array(key), locations=locations)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_index(path: str, key: str, shape: tuple[int, int]) -> Int64Array | None:
    """The cached index at ``path`` if it exists and matches ``key`` and ``shape``, else None."""
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key or data["locations"].shape != shape:
                return None
            return np.asarray(data["locations"], dtype=np.int64)
    except (OSError, ValueError, KeyError):
        return None  # unreadable or partial: rebuild


def key_at(store: Store, info_position: int, index: int) -> str | None:
    """The key of sample ``index`` of the shard at ``info_position`` (for error messages)."""
    with _local_db(store) as path:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            row = db.execute(
                "SELECT sample_key FROM samples WHERE tar_file_id = ? AND sample_index = ?",
                (info_position, index),
            ).fetchone()
        finally:
            db.close()
    return None if row is None else str(row[0])


@contextlib.contextmanager
def _local_db(store: Store) -> Iterator[str]:
    """A local path of ``index.sqlite`` (for remote stores a copy in the metadata cache)."""
    local = store.cached_local_path(INDEX_SQLITE)
    if local is None:
        raise MissingSampleIndexError.for_dataset(store.url(INDEX_SQLITE), "joins")
    yield local
