"""Indexed JSONL: ``name.jsonl`` plus ``name.jsonl.idx``, the same layout as ``.tar.idx``.

Each non-blank line is one sample (a JSON object). The index holds N+1 little-endian uint64
offsets: where each sample's line starts (the first one at 0, so leading blank lines belong to
it) and the file's size last, exactly as Energon writes it.
"""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError
from stoker.format.prepare import TMP_MARK
from stoker.format.tar_index import encode_offsets
from stoker.storage import open_store, split_location

JSONL_INDEX_SUFFIX = ".idx"


def jsonl_index_name(name: str) -> str:
    return name + JSONL_INDEX_SUFFIX


def index_jsonl(data: bytes | memoryview, path: str) -> npt.NDArray[np.uint64]:
    """The N+1 offsets of a JSONL file's content (vectorised; one pass over the bytes)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    size = len(buf)
    if size == 0:
        raise FormatError("empty JSONL file.", path=path, hint="Add at least one JSON line.")
    newlines = np.flatnonzero(buf == ord("\n"))
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [size]))
    keep = starts < ends  # drop the empty tail after a final newline
    starts, ends = starts[keep], ends[keep]
    first = buf[starts]
    last_idx = ends - 1
    last = buf[last_idx]
    last_cr = (last == ord("\r")) & (last_idx > starts)
    last = np.where(last_cr, buf[np.maximum(last_idx - 1, 0)], last)
    good = (first == ord("{")) & (last == ord("}"))
    is_sample = good.copy()
    for i in np.flatnonzero(~good):  # blank lines and lines with surrounding whitespace
        line = bytes(buf[starts[i] : ends[i]]).strip()
        if not line:
            continue
        if not (line.startswith(b"{") and line.endswith(b"}")):
            raise FormatError(
                f"line {int(np.searchsorted(newlines, starts[i])) + 1} is not a JSON object "
                f"({line[:40]!r}).",
                path=path,
                offset=int(starts[i]),
                hint="Each line of a JSONL dataset must be one JSON object {...}.",
            )
        is_sample[i] = True
    sample_starts = starts[is_sample].astype(np.uint64)
    if len(sample_starts) == 0:
        raise FormatError("the JSONL file has no samples (only blank lines).", path=path)
    sample_starts[0] = 0
    return np.concatenate((sample_starts, np.array([size], dtype=np.uint64)))


def prepare_jsonl(path: str) -> tuple[int, int]:
    """Write ``path + '.idx'`` atomically; returns (samples, bytes).

    Example:
        >>> prepare_jsonl("/data/texts.jsonl")  # doctest: +SKIP
        (100000, 52428800)
    """
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise FormatError("JSONL file not found.", path=path, hint="Check the path.")
    offsets = index_jsonl(store.read_bytes(name), path)
    tmp = f"{jsonl_index_name(name)}{TMP_MARK}{os.getpid()}"
    try:
        store.write_bytes(tmp, encode_offsets(offsets))
        store.publish(tmp, jsonl_index_name(name))
    finally:
        store.remove(tmp)
    return len(offsets) - 1, int(offsets[-1])
