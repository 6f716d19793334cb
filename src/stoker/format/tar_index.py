"""``<shard>.tar.idx``: N+1 little-endian uint64 byte offsets, one per sample plus the end.

Entry i is the offset of sample i's first tar header; the last entry is the archive's end offset,
so sample i spans ``idx[i] .. idx[i + 1]``.
"""

from __future__ import annotations

import mmap
import operator
import os

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError

TAR_INDEX_SUFFIX = ".idx"
_DTYPE = np.dtype("<u8")
#: Indexes of at most this many entries are checked in plain Python (a shard of few samples).
_FEW = 256
_HUGE = 1 << 63
#: Entries checked per numpy call where a large index is checked (bounds the temporaries).
_CHECK_BLOCK = 1 << 20


def tar_index_name(shard: str) -> str:
    """The index file of a shard: ``a/b.tar`` -> ``a/b.tar.idx``."""
    return shard + TAR_INDEX_SUFFIX


def encode_offsets(offsets: npt.ArrayLike) -> bytes:
    """The bytes of an index file for ``offsets`` (N sample starts followed by the end)."""
    return np.asarray(offsets, dtype=_DTYPE).tobytes()


def sample_count(size: int, path: str) -> int:
    """The samples an index file of ``size`` bytes lists (one entry fewer than it holds).

    Example:
        >>> sample_count(24, "a.tar.idx")
        2
    """
    if size % 8 or not size:
        raise FormatError(
            f"invalid tar index: {size} bytes is not a positive multiple of 8.",
            path=path,
            hint="Re-create the index with `stoker prepare` (`--tar-index-only` for shards).",
        )
    return size // 8 - 1


def decode_offsets(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The offsets stored in an index file's bytes."""
    sample_count(len(data), path)
    return np.frombuffer(data, dtype=_DTYPE).astype(np.uint64)


def map_offsets(local: str, path: str) -> npt.NDArray[np.uint64]:
    """The offsets of the local index file ``local`` (``path`` names it in errors),
    memory-mapped read-only and checked as :func:`load_offsets` checks them.

    The processes that read one file share its pages in the page cache, where each would
    otherwise hold its own copy: the index of a JSONL file of 10^8 lines is 800 MB. The
    mapping stays valid when the file is replaced (``stoker prepare`` writes a new file and
    renames it over the old one).

    Example:
        >>> import pathlib, tempfile
        >>> index = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl.idx"
        >>> _ = index.write_bytes(encode_offsets([0, 512, 2048]))
        >>> map_offsets(str(index), str(index)).tolist()
        [0, 512, 2048]
    """
    with open(local, "rb") as f:
        return _mapped(f.fileno(), os.fstat(f.fileno()).st_size, path)


def local_offsets(local: str, path: str, map_from: int) -> npt.NDArray[np.uint64] | None:
    """The offsets of the local index file ``local``, checked: mapped as :func:`map_offsets`
    maps them where the file has at least ``map_from`` bytes, else read as
    :func:`load_offsets` reads them, one open either way. None where the file cannot be read
    (the store's read then says why)."""
    try:
        fd = os.open(local, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size >= map_from:
            return _mapped(fd, size, path)
        data = os.read(fd, max(size, 1 << 16))
        return load_offsets(data, path) if len(data) == size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def _mapped(fd: int, size: int, path: str) -> npt.NDArray[np.uint64]:
    """The offsets of the open index file ``fd`` of ``size`` bytes, mapped and checked."""
    sample_count(size, path)
    offsets: npt.NDArray[np.uint64] = np.frombuffer(
        mmap.mmap(fd, 0, access=mmap.ACCESS_READ), dtype=_DTYPE
    )
    for start in range(0, len(offsets), _CHECK_BLOCK):  # with the entry before each block
        _check(offsets[max(0, start - 1) : start + _CHECK_BLOCK], path, max(0, start - 1))
    return offsets


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
    _check(offsets, path, 0)
    return offsets


def _check(offsets: npt.NDArray[np.uint64], path: str, first: int) -> None:
    """Raises for the first entry of ``offsets`` (entry ``first`` of the file onward) beyond
    2^63 - 1 or smaller than the one before it."""
    huge = np.flatnonzero(offsets >= np.uint64(_HUGE))
    if len(huge):
        entry = int(huge[0])
        raise _bad_entry(path, first + entry, f"is {int(offsets[entry])}, beyond 2^63 - 1")
    falling = np.flatnonzero(offsets[1:] < offsets[:-1])
    if len(falling):
        entry = int(falling[0]) + 1
        text = f"({int(offsets[entry])}) is smaller than the entry before it"
        raise _bad_entry(path, first + entry, text)


def _bad_entry(path: str, entry: int, text: str) -> FormatError:
    return FormatError(
        f"invalid tar index: entry {entry} {text}.",
        path=path,
        hint="Re-create the index with `stoker prepare` (`--tar-index-only` for shards); "
        "`stoker lint` shows every problem.",
    )
