"""Index one tar shard: group members into samples and record every byte range."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from stoker.errors import FormatError, StorageError
from stoker.format.tar import BLOCK, ReadAt, TarScan, split_name
from stoker.storage import Store

MAX_PARTS_REPORTED = 50


@dataclass
class ShardIndex:
    """Everything ``prepare`` learns from one shard."""

    name: str
    size: int
    keys: list[str] = field(default_factory=list)
    #: N+1 offsets: each sample's first header, then the archive end.
    offsets: list[int] = field(default_factory=list)
    #: (sample index, part name, data offset, data size) for each part.
    parts: list[tuple[int, str, int, int]] = field(default_factory=list)
    part_names: set[str] = field(default_factory=set)
    #: See :func:`shard_fingerprint`.
    fingerprint: str = ""
    #: Loaded from the work folder of an earlier, interrupted prepare (not read again).
    resumed: bool = False


def scan_shard(store: Store, name: str) -> ShardIndex:
    """Read the headers of shard ``name`` once, sequentially, and index its samples.

    Raises:
        FormatError: not a tar, gzip-compressed, truncated, a damaged header, a sample whose
            members are split, or a part repeated within one sample.
    """
    size = store.size(name)
    where = store.url(name)
    local = store.local_path(name)
    if local is not None:
        try:
            fd = os.open(local, os.O_RDONLY)
        except OSError as e:
            raise StorageError(
                f"cannot read the shard ({e.strerror}).",
                path=where,
                hint="Check that the file exists and is readable.",
            ) from None
        try:
            return _scan(lambda offset, n: os.pread(fd, n, offset), size, name, where)
        finally:
            os.close(fd)
    return _scan(lambda offset, n: store.read_range(name, offset, n), size, name, where)


def _scan(read_at: ReadAt, size: int, name: str, where: str) -> ShardIndex:
    scan = TarScan(read_at, size, where)
    result = ShardIndex(name, size)
    keys, offsets, parts, part_names = result.keys, result.offsets, result.parts, result.part_names
    finished: set[str] = set()
    last_key: str | None = None
    sample_parts: set[str] = set()
    for member in scan:
        if not member.name.isascii():
            _check_utf8(member.name, where, member.offset)
        split = split_name(member.name)
        if split is None:
            continue
        key, part = split
        if key != last_key:
            if key in finished:
                raise FormatError(
                    "the members of this sample are not consecutive in the tar "
                    f"(part {part!r} comes after other samples).",
                    path=where,
                    key=key,
                    offset=member.offset,
                    hint="Each sample's files must be stored together; re-shard the data with "
                    "`stoker pack`.",
                )
            if last_key is not None:
                finished.add(last_key)
            keys.append(key)
            offsets.append(member.offset)
            last_key = key
            sample_parts = set()
        if part in sample_parts:
            raise FormatError(
                f"part {part!r} occurs twice in this sample (the second copy would hide the "
                "first).",
                path=where,
                key=key,
                offset=member.offset,
                hint="Each file of a sample must have its own name; re-shard the data with "
                "`stoker pack`.",
            )
        sample_parts.add(part)
        parts.append((len(keys) - 1, part, member.data_offset, member.size))
        if len(part_names) < MAX_PARTS_REPORTED:
            part_names.add(part)
    if not keys:
        raise FormatError(
            "the shard contains no samples.",
            path=where,
            hint="Remove the empty shard or exclude it with --exclude.",
        )
    offsets.append(scan.end)
    result.fingerprint = shard_fingerprint(read_at, size, offsets[-2])
    return result


def _check_utf8(name: str, where: str, offset: int) -> None:
    """Refuse a member name that is not valid UTF-8 (decoded with ``surrogateescape``):
    ``index.sqlite`` stores keys as text, and a key must print and compare as text."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raw = name.encode("utf-8", "surrogateescape")
        raise FormatError(
            f"the member name {raw!r} is not valid UTF-8; sample keys and part names are "
            "stored and compared as text.",
            path=where,
            offset=offset,
            hint="Rename the file in the tar to a UTF-8 name (e.g. unpack, rename and re-shard "
            "with `stoker pack`), or --exclude this shard.",
        ) from None


def shard_fingerprint(read_at: ReadAt, size: int, last_sample: int) -> str:
    """``size:hash``: the shard's size and a hash of its first header and its last sample's
    first header, so a shard swapped with or replaced by another is told apart cheaply."""
    digest = hashlib.sha256(read_at(0, BLOCK))
    digest.update(read_at(last_sample, BLOCK))
    return f"{size}:{digest.hexdigest()[:32]}"
