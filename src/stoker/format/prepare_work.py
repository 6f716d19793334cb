"""The work folder of an unfinished ``prepare``: one result file per finished shard.

``prepare`` stores what it learns from each shard (sample keys, offsets, parts, and the media
records when media metadata is asked for) in ``.nv-meta/.stoker-work/`` as soon as the shard is
done, each file written under a temporary name and renamed into place. A later run (after a crash,
``kill -9``, or on another rank of a distributed prepare) loads those results instead of reading
the shard again, provided the shard's size and modification time still match; otherwise the shard
is read again. The folder is removed once the dataset is published.

Example:
    >>> from stoker.format.pack import pack
    >>> from stoker.storage import open_store
    >>> _ = pack("raw", "work-wds", samples_per_shard=20)
    >>> work = PrepareWork(open_store("work-wds"))
    >>> shard = work.scan("shard-000000.tar")
    >>> len(shard.keys), shard.resumed
    (20, False)
    >>> work.scan("shard-000000.tar").resumed  # the stored result, as after a kill
    True
    >>> work.remove()
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import uuid
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.format.meta import META_DIR
from stoker.format.shard_scan import ShardIndex, scan_shard
from stoker.storage import Store

#: Relative to the dataset root. Hidden, so ``find_shards`` never looks inside.
WORK_DIR = f"{META_DIR}/.stoker-work"
#: The lock of the running prepare (:mod:`stoker.format.prepare_lock`): kept by :meth:`remove`.
LOCK_NAME = f"{WORK_DIR}/prepare.lock"
#: Bumped whenever the layout of a result file changes: older results are then ignored.
RESULT_VERSION = 1
#: In the name of every temporary file of a prepare (``<final name><mark><token>``).
TMP_MARK = ".stoker-tmp-"


class PrepareWork:
    """Per-shard results of the prepare of the dataset in ``store``, kept until publish."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def result_name(self, shard: str, kind: str) -> str:
        """The work file of ``shard`` (``kind``: ``shard`` or ``media``), named by a hash."""
        digest = hashlib.sha256(shard.encode()).hexdigest()[:24]
        return f"{WORK_DIR}/{kind}/{digest[:2]}/{digest}.npz"

    def fingerprint(self, shard: str) -> dict[str, Any]:
        """What must still match for a stored result to be used: size and modification time."""
        local = self.store.local_path(shard)
        if local is not None:
            try:
                stat = os.stat(local)
            except OSError:
                return {"missing": True}  # reading the shard then says what is wrong
            return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        modified = self.store.modified(shard)
        return {"size": self.store.size(shard), "modified": modified}

    def scan(self, shard: str) -> ShardIndex:
        """The index of ``shard``: loaded from the work folder when still valid, else scanned
        (and stored there)."""
        fingerprint = self.fingerprint(shard)
        loaded = self.load_shard(shard, fingerprint)
        if loaded is not None:
            return loaded
        result = scan_shard(self.store, shard)
        self.save_shard(result, fingerprint)
        return result

    def save_shard(self, shard: ShardIndex, fingerprint: dict[str, Any]) -> None:
        names = sorted({part for _, part, _, _ in shard.parts})
        ids = {name: i for i, name in enumerate(names)}
        parts = np.array(
            [(i, ids[part], offset, size) for i, part, offset, size in shard.parts], dtype="<i8"
        ).reshape(-1, 4)
        arrays = {
            "keys": _pack_strings(shard.keys),
            "offsets": np.asarray(shard.offsets, dtype="<u8"),
            "parts": parts,
            "part_table": _pack_strings(names),
            "part_names": _pack_strings(sorted(shard.part_names)),
            "fingerprint": _pack_strings([shard.fingerprint]),
        }
        self._save(self.result_name(shard.name, "shard"), shard.name, fingerprint, {}, arrays)

    def load_shard(self, shard: str, fingerprint: dict[str, Any]) -> ShardIndex | None:
        """The stored index of ``shard``, or None if there is none or it is stale."""
        loaded = self._load(self.result_name(shard, "shard"), shard, fingerprint, {})
        if loaded is None:
            return None
        names = _unpack_strings(loaded["part_table"])
        parts = loaded["parts"].tolist()
        return ShardIndex(
            name=shard,
            size=int(fingerprint["size"]),
            keys=_unpack_strings(loaded["keys"]),
            offsets=loaded["offsets"].tolist(),
            parts=[(i, names[p], offset, size) for i, p, offset, size in parts],
            part_names=set(_unpack_strings(loaded["part_names"])),
            fingerprint=_unpack_strings(loaded["fingerprint"])[0],
            resumed=True,
        )

    def save_json(self, shard: str, kind: str, fingerprint: dict[str, Any], value: Any) -> None:
        """Store a JSON-able ``value`` for ``shard`` (e.g. its media records) under ``kind``."""
        data = np.frombuffer(json.dumps(value).encode(), dtype=np.uint8)
        self._save(self.result_name(shard, kind), shard, fingerprint, {"kind": kind}, {"v": data})

    def load_json(self, shard: str, kind: str, fingerprint: dict[str, Any]) -> Any | None:
        loaded = self._load(self.result_name(shard, kind), shard, fingerprint, {"kind": kind})
        return None if loaded is None else json.loads(loaded["v"].tobytes())

    def remove(self) -> None:
        """Delete the work folder (after publish)."""
        local = self.store.local_path(WORK_DIR)
        if local is not None:
            keep = os.path.basename(LOCK_NAME)  # the lock's holder removes it
            for entry in os.listdir(local) if os.path.isdir(local) else []:
                if entry == keep:
                    continue
                path = os.path.join(local, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(path)
            with contextlib.suppress(OSError):
                os.rmdir(local)  # empty: no lock (a library call without one)
        elif self.store.is_dir(WORK_DIR):
            for name in self.store.list_files(WORK_DIR):  # relative to the dataset root
                self.store.remove(name)

    def _save(
        self,
        name: str,
        shard: str,
        fingerprint: dict[str, Any],
        extra: dict[str, Any],
        arrays: dict[str, npt.NDArray[Any]],
    ) -> None:
        header = {"version": RESULT_VERSION, "shard": shard, "fingerprint": fingerprint, **extra}
        buf = io.BytesIO()
        arrays = {"header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8), **arrays}
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        tmp = f"{name}{TMP_MARK}{uuid.uuid4().hex[:12]}"
        self.store.write_bytes(tmp, buf.getvalue())
        self.store.publish(tmp, name)

    def _load(
        self, name: str, shard: str, fingerprint: dict[str, Any], extra: dict[str, Any]
    ) -> dict[str, npt.NDArray[Any]] | None:
        if not self.store.exists(name):
            return None
        try:
            with np.load(io.BytesIO(self.store.read_bytes(name)), allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
            header = json.loads(arrays.pop("header").tobytes())
        except (OSError, ValueError, KeyError):
            return None  # damaged (e.g. a disk full when written): do the shard again
        expected = {
            "version": RESULT_VERSION,
            "shard": shard,
            "fingerprint": json.loads(json.dumps(fingerprint)),
            **extra,
        }
        return arrays if header == expected else None


def _pack_strings(items: list[str]) -> npt.NDArray[np.uint8]:
    """Strings as one byte array: a little-endian uint64 length table, then the UTF-8 bytes."""
    encoded = [s.encode("utf-8", "surrogateescape") for s in items]
    lengths = np.array([len(b) for b in encoded], dtype="<u8")
    head = np.array([len(encoded)], dtype="<u8")
    return np.frombuffer(head.tobytes() + lengths.tobytes() + b"".join(encoded), dtype=np.uint8)


def _unpack_strings(data: npt.NDArray[np.uint8]) -> list[str]:
    raw = data.tobytes()
    count = int(np.frombuffer(raw[:8], dtype="<u8")[0])
    lengths = np.frombuffer(raw[8 : 8 + 8 * count], dtype="<u8")
    ends = np.cumsum(lengths).tolist()
    body = raw[8 + 8 * count :]
    starts = [0, *ends[:-1]]
    return [body[a:b].decode("utf-8", "surrogateescape") for a, b in zip(starts, ends, strict=True)]
