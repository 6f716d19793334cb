"""``<shard>.tar.idx``: N+1 little-endian uint64 byte offsets, one per sample plus the end.

Entry i is the offset of sample i's first tar header; the last entry is the archive's end offset,
so sample i spans ``idx[i] .. idx[i + 1]``.
"""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError

TAR_INDEX_SUFFIX = ".idx"
_DTYPE = np.dtype("<u8")
#: Indexes of at most this many entries are checked in plain Python (a shard of few samples).
_FEW = 256
_HUGE = 1 << 63


def tar_index_name(shard: str) -> str:
    """The index file of a shard: ``a/b.tar`` -> ``a/b.tar.idx``."""
    return shard + TAR_INDEX_SUFFIX


def encode_offsets(offsets: npt.ArrayLike) -> bytes:
    """The bytes of an index file for ``offsets`` (N sample starts followed by the end)."""
    return np.asarray(offsets, dtype=_DTYPE).tobytes()


def decode_offsets(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The offsets stored in an index file's bytes."""
    if len(data) % 8 or not data:
        raise FormatError(
            f"invalid tar index: {len(data)} bytes is not a positive multiple of 8.",
            path=path,
            hint="Re-create the index with `stoker prepare` (`--tar-index-only` for shards).",
        )
    return np.frombuffer(data, dtype=_DTYPE).astype(np.uint64)


def load_offsets(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The offsets of an index file, checked for use at load: each entry below 2^63 and each
    at least the one before it (lint reports the finer problems with ``decode_offsets``).

    Example:
        >>> load_offsets(encode_offsets([0, 1024, 2048]), "a.tar.idx").tolist()
        [0, 1024, 2048]
    """
    offsets = decode_offsets(data, path)
    if len(offsets) <= _FEW:  # the common checks in C loops (numpy calls cost more here)
        values = offsets.tolist()
        if values[-1] < _HUGE and all(map(operator.le, values, values[1:])):
            return offsets
    huge = np.flatnonzero(offsets >= np.uint64(_HUGE))
    if len(huge):
        raise _bad_entry(path, int(huge[0]), f"is {int(offsets[huge[0]])}, beyond 2^63 - 1")
    falling = np.flatnonzero(offsets[1:] < offsets[:-1])
    if len(falling):
        entry = int(falling[0]) + 1
        text = f"({int(offsets[entry])}) is smaller than the entry before it"
        raise _bad_entry(path, entry, text)
    return offsets


def _bad_entry(path: str, entry: int, text: str) -> FormatError:
    return FormatError(
        f"invalid tar index: entry {entry} {text}.",
        path=path,
        hint="Re-create the index with `stoker prepare` (`--tar-index-only` for shards); "
        "`stoker lint` shows every problem.",
    )
