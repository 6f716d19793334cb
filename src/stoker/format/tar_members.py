"""The members of one tar sample (the bytes from its first header to the next sample's) as a
:class:`RawSample`: its key and its parts.

:func:`parse_simple` reads the common case (plain members, one key) in one pass and gives up on
anything else; :func:`parse_sample` reads every case (pax and long names, meta members) and says
what is wrong with a bad one.
"""

from __future__ import annotations

from typing import NamedTuple
from zlib import adler32

from stoker.errors import CorruptShardError, FormatError
from stoker.format.tar import BLOCK, SKIP_META_RE, SPLIT_NAME_RE, TarScan, checksum_ok, split_name


class RawSample(NamedTuple):
    """The undecoded parts of one sample and where they came from (a named tuple: one is made
    per sample)."""

    key: str
    parts: dict[str, bytes]
    shard: str
    index: int  # type: ignore[assignment]  # the field hides tuple.index, as intended
    offset: int

    @property
    def file_names(self) -> tuple[str, ...]:
        key = self.key
        return tuple([f"{key}.{part}" for part in self.parts])


#: ``RawSample(...)`` without its Python-level ``__new__`` (a named tuple's), for many samples:
#: ``new_raw(RawSample, (key, parts, shard, index, offset))``.
new_raw = tuple.__new__


#: split_name's two patterns (read once per tar member of a small sample).
_skip_meta, _split_match = SKIP_META_RE.match, SPLIT_NAME_RE.match

#: Header type flags of regular files (``0``, NUL for old tars, ``7``).
_REGULAR = frozenset(b"0\x007")


def parse_simple(data: bytes) -> tuple[str, dict[str, bytes]] | None:
    """The key and parts of a sample that is only plain members (regular files with names of
    up to 100 bytes, sizes in octal, valid checksums, one key, no pax or long-name headers, no
    meta members), the common case, in one pass; None for anything else (:func:`parse_sample`
    reads it then, and reports what is wrong).

    Example:
        >>> import io, tarfile
        >>> out = io.BytesIO()
        >>> with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        ...     info = tarfile.TarInfo("k1.txt"); info.size = 2
        ...     tar.addfile(info, io.BytesIO(b"hi"))
        >>> parse_simple(out.getvalue()[:1024])
        ('k1', {'txt': b'hi'})
    """
    key: str | None = None
    parts: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        header = data[pos : pos + BLOCK]
        if len(header) < BLOCK or header[156] not in _REGULAR or header[124] & 0x80:
            return None
        if header[345] and header[257:262] == b"ustar":  # a name prefix: the full reader
            return None
        # checksum_ok, inline for its common case (the unsigned sum; it decides the others)
        stored = header[148:156]
        try:
            unsigned = int(stored.split(b"\0", 1)[0].strip(), 8) == (
                (adler32(header[:256]) & 0xFFFF) + (adler32(header[256:]) & 0xFFFF)
                - 2 - sum(stored) + 256
            )  # fmt: skip
        except ValueError:
            return None
        if not unsigned and not checksum_ok(header):
            return None
        try:
            size = int(header[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
        except ValueError:
            return None
        # split_name, inline
        name = header[:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        match = None if _skip_meta(name) else _split_match(name)
        if match is None:
            return None
        split = match.groups()
        if split[1] in parts or (key is not None and split[0] != key):
            return None
        key = split[0]
        start = pos + BLOCK
        if start + size > end:
            return None
        parts[split[1]] = data[start : start + size]
        pos = start + (size + BLOCK - 1) // BLOCK * BLOCK
    return None if key is None else (key, parts)


def parse_sample(data: bytes, where: str, shard: str, index: int, offset: int) -> RawSample:
    key: str | None = None
    parts: dict[str, bytes] = {}
    scan = TarScan(lambda off, n: data[off : off + n], len(data), where)
    try:
        for member in scan:
            split = split_name(member.name)
            if split is None:
                continue
            if key is None:
                key = split[0]
            elif split[0] != key:
                break
            if split[1] in parts:  # WebDataset raises too: the second copy would hide the first
                raise FormatError(
                    f"part {split[1]!r} occurs twice in sample {index} of the shard.",
                    path=where,
                    key=key,
                    offset=member.offset,
                    hint="Each file of a sample needs its own name; re-shard the data with "
                    "`stoker pack` and prepare it again.",
                )
            parts[split[1]] = data[member.data_offset : member.data_offset + member.size]
    except FormatError as e:
        raise FormatError(
            e.problem, path=where, key=e.key, offset=offset + (e.offset or 0), hint=e.hint
        ) from None
    if key is None:
        raise CorruptShardError(
            f"sample {index} has no members at the indexed offset.",
            path=where,
            offset=offset,
            hint="The .tar.idx does not match the shard; run `stoker prepare --tar-index-only`.",
        )
    return RawSample(key, parts, shard, index, offset)
