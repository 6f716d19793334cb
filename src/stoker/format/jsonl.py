"""Indexed JSONL: ``name.jsonl`` plus ``name.jsonl.idx``, the same layout as ``.tar.idx``.

Each non-blank line is one sample (a JSON object). The index holds N+1 little-endian uint64
offsets: where each sample's line starts (the first one at 0, so leading blank lines belong to
it) and the file's size last, exactly as Energon writes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError
from stoker.format.pending import TMP_MARK
from stoker.format.progress import Progress
from stoker.format.tar_index import encode_offsets
from stoker.storage import open_store, split_location

JSONL_INDEX_SUFFIX = ".idx"
MIB = 1 << 20
#: Bytes of a JSONL file indexed per step (the file is never held whole).
CHUNK = 16 << 20


def jsonl_index_name(name: str) -> str:
    return name + JSONL_INDEX_SUFFIX


def index_jsonl(data: bytes | memoryview, path: str) -> npt.NDArray[np.uint64]:
    """The N+1 offsets of a JSONL file's content (vectorised; one pass over the bytes).

    Example:
        >>> index_jsonl(b'{"a": 1}\\n\\n{"a": 2}\\n', "t.jsonl").tolist()
        [0, 10, 19]
    """
    return index_jsonl_chunks([data], path)


def index_jsonl_chunks(chunks: Iterable[bytes | memoryview], path: str) -> npt.NDArray[np.uint64]:
    """:func:`index_jsonl` of the concatenation of ``chunks``, holding one chunk (and the
    start of a line it does not end) at a time."""
    parts: list[npt.NDArray[np.uint64]] = []
    _index_lines(chunks, path, parts.append)
    return np.concatenate(parts)


def _index_lines(
    chunks: Iterable[bytes | memoryview], path: str, sink: Callable[[npt.NDArray[np.uint64]], Any]
) -> tuple[int, int]:
    """Hands the offsets of the JSONL file ``chunks`` to ``sink``, a piece at a time, in
    order; returns (samples, bytes)."""
    indexer = _LineIndexer(path, sink)
    for chunk in chunks:
        indexer.feed(chunk)
    return indexer.finish()


class _LineIndexer:
    """Finds the sample lines of a JSONL file fed in pieces of any size."""

    def __init__(self, path: str, sink: Callable[[npt.NDArray[np.uint64]], Any]) -> None:
        self.path, self.sink = path, sink
        self.carry = b""  # the start of a line no piece so far ended
        self.base = 0  # the file offset of ``carry``
        self.lines = 0  # newlines before ``carry``
        self.samples = 0

    def feed(self, chunk: bytes | memoryview) -> None:
        data = self.carry + bytes(chunk) if self.carry else chunk
        buf = np.frombuffer(data, dtype=np.uint8)
        newlines = np.flatnonzero(buf == ord("\n"))
        cut = int(newlines[-1]) + 1 if len(newlines) else 0
        self._lines(buf[:cut], newlines)
        self.carry = bytes(buf[cut:])
        self.base += cut
        self.lines += len(newlines)

    def finish(self) -> tuple[int, int]:
        self._lines(np.frombuffer(self.carry, dtype=np.uint8), np.zeros(0, np.int64))
        size = self.base + len(self.carry)
        if size == 0:
            raise FormatError(
                "empty JSONL file.", path=self.path, hint="Add at least one JSON line."
            )
        if not self.samples:
            raise FormatError("the JSONL file has no samples (only blank lines).", path=self.path)
        self.sink(np.array([size], dtype=np.uint64))
        return self.samples, size

    def _lines(self, buf: npt.NDArray[np.uint8], newlines: npt.NDArray[np.intp]) -> None:
        """The sample lines of ``buf``: whole lines, each ended by one of ``newlines`` but
        perhaps the last (the end of the file)."""
        size = len(buf)
        if size == 0:
            return
        starts = np.concatenate(([0], newlines + 1))
        ends = np.concatenate((newlines, [size]))
        keep = starts < ends  # drop empty lines, and the empty tail after the last newline
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
                number = self.lines + int(np.searchsorted(newlines, starts[i])) + 1
                raise FormatError(
                    f"line {number} is not a JSON object ({line[:40]!r}).",
                    path=self.path,
                    offset=self.base + int(starts[i]),
                    hint="Each line of a JSONL dataset must be one JSON object {...}.",
                )
            is_sample[i] = True
        found = starts[is_sample].astype(np.uint64) + np.uint64(self.base)
        if len(found):
            if not self.samples:
                found[0] = 0  # leading blank lines belong to the first sample
            self.samples += len(found)
            self.sink(found)


def prepare_jsonl(path: str, *, progress: bool = False) -> tuple[int, int]:
    """Write ``path + '.idx'`` atomically; returns (samples, bytes). The file is read in
    pieces of :data:`CHUNK` bytes (``progress``: shown as :class:`Progress` shows it).

    Example:
        >>> prepare_jsonl("texts.jsonl")  # 100 lines, 1,990 bytes
        (100, 1990)
    """
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise FormatError("JSONL file not found.", path=path, hint="Check the path.")
    mib = -(-store.size(name) // MIB)
    tmp = f"{jsonl_index_name(name)}{TMP_MARK}{os.getpid()}"
    local = store.local_path(tmp)
    try:
        with (
            store.open(name) as f,
            Progress(mib, "Indexing lines", unit="MiB", enabled=progress) as bar,
        ):
            if local is not None:  # written as found: the index is never held whole either
                with open(local, "wb") as out:
                    samples, size = _index_lines(_pieces(f, bar), path, lambda o: out.write(_le(o)))
            else:
                parts: list[npt.NDArray[np.uint64]] = []
                samples, size = _index_lines(_pieces(f, bar), path, parts.append)
                store.write_bytes(tmp, encode_offsets(np.concatenate(parts)))
        store.publish(tmp, jsonl_index_name(name))
    finally:
        store.remove(tmp)
    return samples, size


def _pieces(f: BinaryIO, bar: Progress) -> Iterator[bytes]:
    """The pieces of :data:`CHUNK` bytes of ``f``, counted in ``bar`` in whole MiB (the last
    piece rounded up)."""
    done = 0
    while chunk := f.read(CHUNK):
        done += len(chunk)
        bar.update(-(-done // MIB) - bar.done)
        yield chunk


def _le(offsets: npt.NDArray[np.uint64]) -> memoryview:
    """The bytes of ``offsets`` as the index stores them (little-endian: no copy on such
    machines)."""
    return offsets.astype("<u8", copy=False).data
