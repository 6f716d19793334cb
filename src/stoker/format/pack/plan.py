"""Plan the shard cuts: exact tar sizes of samples, and where each shard ends.

Pure functions of integers (and of member names, for the header sizes): :func:`plan_shards`
closes a shard at a sample count or before a byte limit, from the sizes that
:func:`sample_tar_bytes` computes, so the plan is exact before any byte is written.
"""

from __future__ import annotations

import tarfile
from collections.abc import Sequence

from stoker.format.pack.samples import ENCODING, Sample

_END_OF_ARCHIVE = 2 * tarfile.BLOCKSIZE


def tar_info(name: str, size: int) -> tarfile.TarInfo:
    """The header of member ``name``: deterministic (no time, owner or mode of the source)."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def sample_tar_bytes(sample: Sample) -> int:
    """Exact bytes the sample's members take in a tar (headers plus data padded to 512)."""
    total = 0
    for part in sample.parts:
        header = tar_info(f"{sample.key}.{part.name}", part.size).tobuf(
            tarfile.PAX_FORMAT, ENCODING
        )
        total += len(header) + _round_up(part.size, tarfile.BLOCKSIZE)
    return total


def shard_file_bytes(member_bytes: int) -> int:
    """Size of a tar holding ``member_bytes`` of members (end marker, padding to a record)."""
    return _round_up(member_bytes + _END_OF_ARCHIVE, tarfile.RECORDSIZE)


def _round_up(n: int, block: int) -> int:
    return -(-n // block) * block


def plan_shards(
    sizes: Sequence[int], samples_per_shard: int | None, max_shard_bytes: int | None
) -> list[int]:
    """The end index (exclusive) of each shard, for samples of the given tar sizes, in order.

    A shard closes when it holds ``samples_per_shard`` samples or when the next sample would make
    its file larger than ``max_shard_bytes``; a sample too large for any shard gets its own.

    Example:
        >>> plan_shards([1, 1, 1, 1, 1], 2, None)
        [2, 4, 5]
    """
    ends: list[int] = []
    count = used = 0
    for i, size in enumerate(sizes):
        full = samples_per_shard is not None and count >= samples_per_shard
        if not full and max_shard_bytes is not None and count > 0:
            full = shard_file_bytes(used + size) > max_shard_bytes
        if full:
            ends.append(i)
            count = used = 0
        count += 1
        used += size
    if count:
        ends.append(len(sizes))
    return ends
