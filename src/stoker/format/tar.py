"""Reading tar archives the way WebDataset and Energon see them, one header at a time.

A sample is a run of consecutive regular members that share a key: the member name up to the
first dot of its base name (``a/b/0001.seg.png`` has key ``a/b/0001`` and part ``seg.png``).
Members named ``__*__`` (or inside such a folder) and names without a dot are skipped.

The scanner reads only the 512-byte headers and skips member data, so indexing a shard costs
one pass over its headers, not over its bytes.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from stoker.errors import FormatError

BLOCK = 512
#: Energon's rule for splitting a member name into (sample key, part name).
SPLIT_NAME_RE = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
#: Energon's rule for meta members that belong to no sample.
SKIP_META_RE = re.compile(r"__[^/]*__($|/)")

_REGULAR_TYPES = frozenset(b"0\x007")
_GZIP_MAGIC = b"\x1f\x8b"
_WINDOW = 1 << 20
#: Largest pax or GNU long-name header data read (real ones are a few hundred bytes).
_MAX_EXTENDED = 16 << 20
_PAX_RECORD_RE = re.compile(rb"([0-9]{1,19}) ([^=\0]+)=")
_PAX_SIZE_RE = re.compile(r"[0-9]{1,19}")

#: Reads ``size`` bytes at ``offset`` (fewer at the end of the file).
ReadAt = Callable[[int, int], bytes]


@dataclass(frozen=True, slots=True)
class TarMember:
    """One regular file in a tar archive."""

    name: str
    #: Offset of the member's first header (including GNU long-name and pax headers).
    offset: int
    #: Offset of the member's data.
    data_offset: int
    size: int


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, part)`` of a member name, or None if the member belongs to no sample.

    Example:
        >>> split_name("dir/0001.seg.png")
        ('dir/0001', 'seg.png')
        >>> split_name("__meta__") is None
        True
    """
    if SKIP_META_RE.match(name):
        return None
    match = SPLIT_NAME_RE.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2)


class _Window:
    """Caches a window of the file so that headers of small members cost no extra reads."""

    def __init__(self, read_at: ReadAt) -> None:
        self._read_at = read_at
        self._start = 0
        self._data = b""

    def read(self, offset: int, size: int) -> bytes:
        end = offset + size
        if offset < self._start or end > self._start + len(self._data):
            self._start = offset
            self._data = self._read_at(offset, max(size, _WINDOW))
        return self._data[offset - self._start : end - self._start]


def _octal(field: bytes, where: str, path: str, offset: int) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256 for large numbers
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * len(field) - 8)) if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise _bad_header(
            f"{where} field", f"{text[:16]!r} is not a number.", path, offset
        ) from None


def _byte_sum(block: bytes) -> int:
    """The sum of a 512-byte block's bytes, in C: Adler-32's first half is 1 + the byte sum
    modulo 65521, exact for 256 bytes (at most 65280), so two halves give the sum."""
    return (zlib.adler32(block[:256]) & 0xFFFF) + (zlib.adler32(block[256:]) & 0xFFFF) - 2


def checksum_ok(header: bytes) -> bool:
    """The header's checksum field matches its bytes (unsigned sum, or the signed sum some old
    tar programs wrote, as Python's ``tarfile`` accepts)."""
    stored = header[148:156].split(b"\0", 1)[0].strip()
    try:
        expected = int(stored, 8)
    except ValueError:
        return False
    unsigned = _byte_sum(header) - sum(header[148:156]) + 8 * 32
    if expected == unsigned:
        return True
    signed = sum(b - 256 if b > 127 else b for b in header)
    return expected == signed - sum(b - 256 if b > 127 else b for b in header[148:156]) + 8 * 32


def _bad_header(field: str, problem: str, path: str, offset: int) -> FormatError:
    return FormatError(
        f"corrupt tar header: the {field} {problem}",
        path=path,
        offset=offset,
        hint="The file is damaged or not a tar archive; recreate it (e.g. with `stoker pack`).",
    )


def _parse_pax(data: bytes, path: str, offset: int) -> dict[str, str]:
    """The records ``"<length> <key>=<value>\\n"`` of pax data that starts at byte ``offset``."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        match = _PAX_RECORD_RE.match(data, pos)
        length = int(match.group(1)) if match is not None else 0
        end = pos + length
        if match is None or end > len(data) or end <= match.end() or data[end - 1] != 0x0A:
            raise _bad_header(
                "pax record",
                f"at data byte {pos} is malformed (want '<length> <key>=<value>\\n' with a "
                f"length that covers the record; got {data[pos : pos + 24]!r}).",
                path,
                offset + pos,
            )
        key = match.group(2).decode("utf-8", "surrogateescape")
        records[key] = data[match.end() : end - 1].decode("utf-8", "surrogateescape")
        pos = end
    return records


def _pax_size(value: str, path: str, offset: int) -> int:
    if _PAX_SIZE_RE.fullmatch(value) is None:
        raise _bad_header(
            "pax size",
            f"{value[:24]!r} is not a non-negative decimal number.",
            path,
            offset,
        )
    return int(value)


def _check_start(first: bytes, path: str) -> None:
    if first[:2] == _GZIP_MAGIC:
        raise FormatError(
            "this is a gzip-compressed tar: random access to its samples is impossible.",
            path=path,
            hint="Decompress it (`gunzip -c x.tar.gz > x.tar`) or re-shard the data with "
            "`stoker pack`.",
        )
    if len(first) < BLOCK or not checksum_ok(first[:BLOCK]):
        raise FormatError(
            "not a tar archive (the first header is invalid).",
            path=path,
            offset=0,
            hint="Check that the file is an uncompressed tar; `stoker pack` makes shards from "
            "a folder of files.",
        )


class TarScan:
    """Iterates the regular members of a tar; afterwards ``end`` is the archive's end offset.

    The end offset is where the end-of-archive marker starts (or the file's size if it has none),
    as Python's ``tarfile`` reports it after reading all members; Energon stores it as the last
    entry of ``.tar.idx``.

    Raises:
        FormatError: the file is not a tar, is gzip-compressed, is truncated, or a header is
            damaged (bad checksum, size or pax record).
    """

    def __init__(self, read_at: ReadAt, file_size: int, path: str) -> None:
        self._read_at = read_at
        self._file_size = file_size
        self._path = path
        self.end = 0

    def __iter__(self) -> Iterator[TarMember]:
        yield from _iter_members(self._read_at, self._file_size, self._path, self)


def _iter_members(read_at: ReadAt, file_size: int, path: str, scan: TarScan) -> Iterator[TarMember]:
    window = _Window(read_at)
    _check_start(window.read(0, BLOCK), path)
    pos = 0
    long_name: str | None = None
    pax: dict[str, str] = {}
    member_start: int | None = None
    while pos + BLOCK <= file_size:
        header = window.read(pos, BLOCK)
        if len(header) < BLOCK:
            raise FormatError(
                f"truncated tar: only {len(header)} bytes of a header could be read.",
                path=path,
                offset=pos,
                hint="The file was cut short or changed while being read; copy it again.",
            )
        if header.count(0) == BLOCK:  # end-of-archive marker
            scan.end = pos
            return
        if not checksum_ok(header):
            stored = header[148:156].split(b"\0", 1)[0].strip()
            raise _bad_header(
                "checksum", f"{stored[:8]!r} does not match the header's bytes.", path, pos
            )
        if member_start is None:
            member_start = pos
        kind = header[156]
        size = _octal(header[124:136], "size", path, pos)
        if "size" in pax:
            size = _pax_size(pax["size"], path, pos)
        if size < 0:
            raise _bad_header("size field", f"is negative ({size}).", path, pos)
        data_offset = pos + BLOCK
        # size >= 0, so next_pos > pos: the walk always moves forward and ends within the file.
        next_pos = data_offset + (size + BLOCK - 1) // BLOCK * BLOCK
        if data_offset + size > file_size:
            raise FormatError(
                f"truncated tar: a member needs {size} bytes but the file ends "
                f"{file_size - data_offset} bytes after its header.",
                path=path,
                offset=pos,
                hint="The file was cut short (interrupted copy or download); copy it again.",
            )
        if kind in (ord("L"), ord("x"), ord("g")):
            if size > _MAX_EXTENDED:
                raise _bad_header(
                    "size field", f"of an extended header is {size} bytes (too large).", path, pos
                )
            data = window.read(data_offset, size) if size <= _WINDOW else read_at(data_offset, size)
            if kind == ord("L"):
                long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            elif kind == ord("x"):
                pax = _parse_pax(data, path, data_offset)
            pos = next_pos
            continue
        if long_name is not None:
            name = long_name
        elif "path" in pax:
            name = pax["path"]
        else:
            name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if header[257:262] == b"ustar" and header[345]:
                prefix = header[345:500].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                name = f"{prefix}/{name}"
        if kind in _REGULAR_TYPES:
            yield TarMember(name, member_start, data_offset, size)
        long_name, pax, member_start = None, {}, None
        pos = next_pos
    scan.end = min(pos, file_size)  # the last member's padding may be cut short
    if pos < file_size and file_size - pos < BLOCK:
        raise FormatError(
            f"truncated tar: {file_size - pos} stray bytes after the last member.",
            path=path,
            offset=pos,
            hint="The file was cut short; copy it again.",
        )
