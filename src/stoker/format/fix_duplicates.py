"""``prepare --fix-duplicates``: make sample keys unique by renaming tar members in place.

As Energon's ``prepare --fix-duplicates``: when a sample key occurs in more than one shard, every
member of every shard is renamed to ``<shard path>/<name>`` (``000001.jpg`` in ``part/a.tar``
becomes ``part/a.tar/000001.jpg``, key ``part/a.tar/000001``), which makes keys unique. Only the
512-byte headers are rewritten (name fields and checksum), so offsets and data stay where they
are. The rename is refused, before anything is written, where it cannot be done in place: GNU
long names, pax headers that carry a path, names that would not fit the header, a key that
occurs twice within one shard. Local datasets only.

Example:
    >>> from stoker.format.pack import pack
    >>> for part in ("a", "b"):  # the same 60 keys twice
    ...     _ = pack("raw", f"merged-wds/{part}", samples_per_shard=30)
    >>> report = fix_duplicate_keys("merged-wds")
    >>> report.renamed_shards, report.duplicate_keys
    (4, 60)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from stoker.errors import ConfigError, FormatError
from stoker.format.prepare import find_shards
from stoker.format.tar import split_name
from stoker.storage import open_store

BLOCK = 512
_POSIX_MAGIC = b"ustar\x00"
_EXTENDED = frozenset(b"xg")
_LONG_NAME = frozenset(b"LK")
_PAX_PATH_KEYS = frozenset(
    {b"path", b"linkpath", b"gnu.path", b"gnu.linkpath", b"SCHILY.path", b"SCHILY.linkpath"}
)


@dataclass
class FixReport:
    """What :func:`fix_duplicate_keys` found and did."""

    shards: int
    #: Keys found in more than one shard.
    duplicate_keys: int
    #: Shards whose members were renamed (all of them, or none when no key was duplicated).
    renamed_shards: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Header:
    offset: int
    block: bytes
    #: The member's name as stored (prefix/name for POSIX ustar headers).
    name: str
    #: A pax header that sets a path (the rename would not change the name readers use).
    pax_path: bool = False


def fix_duplicate_keys(
    path: str, exclude: str | None = None, shards: list[str] | None = None
) -> FixReport:
    """Rename the members of every shard of ``path`` if a sample key occurs in two shards.

    Raises:
        ConfigError: the dataset is not on a local filesystem.
        FormatError: keys are duplicated but the shards cannot be renamed in place (why and where).
    """
    store = open_store(path)
    names = find_shards(store, exclude) if shards is None else shards
    files: list[tuple[str, str]] = []
    for name in names:
        local = store.local_path(name)
        if local is None:
            raise ConfigError(
                "--fix-duplicates renames tar members in place, which needs a local dataset.",
                path=path,
                hint="Copy the dataset to a local disk, prepare it there, and copy it back.",
            )
        files.append((name, local))
    owners: dict[str, str] = {}
    duplicates: dict[str, list[str]] = {}
    problems: list[str] = []
    for name, local in files:
        for key in _shard_keys(name, local, problems):
            if key in owners and owners[key] != name:
                duplicates.setdefault(key, [owners[key]]).append(name)
            owners.setdefault(key, name)
    examples = [f"{key!r} in {', '.join(where)}" for key, where in list(duplicates.items())[:3]]
    report = FixReport(len(files), len(duplicates), examples=examples)
    if not duplicates:
        return report
    if problems:
        raise FormatError(
            f"{len(duplicates)} sample keys occur in more than one shard (e.g. {examples[0]}), "
            f"but the shards cannot be renamed in place: {problems[0]}"
            + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""),
            path=path,
            hint="Re-shard the data with `stoker pack`, which makes keys unique.",
        )
    for name, local in files:
        _rename_members(local, f"{name}/")
    report.renamed_shards = len(files)
    return report


def _shard_keys(name: str, local: str, problems: list[str]) -> list[str]:
    """The sample keys of one shard, in order; appends why an in-place rename is impossible."""
    keys: list[str] = []
    seen: set[str] = set()
    for header in _headers(local):
        kind = header.block[156]
        where = f"{name} at offset {header.offset}"
        if kind in _LONG_NAME:
            problems.append(f"a GNU long name or link header in {where}")
            continue
        if kind in _EXTENDED:
            if header.pax_path:
                problems.append(f"a pax header that sets a path in {where}")
            continue
        if _new_fields(header.block, f"{name}/{header.name}") is None:
            problems.append(f"the new name of {header.name!r} does not fit its header ({where})")
        parts = split_name(header.name)
        if parts is None or (keys and keys[-1] == parts[0]):
            continue
        if parts[0] in seen:
            problems.append(f"key {parts[0]!r} occurs twice within {name}")
        seen.add(parts[0])
        keys.append(parts[0])
    return keys


def _headers(local: str) -> Iterator[_Header]:
    """The headers of a tar file, in order."""
    with open(local, "rb") as f:
        offset = 0
        while True:
            f.seek(offset)
            block = f.read(BLOCK)
            if len(block) < BLOCK or block.count(0) == BLOCK:
                return
            size = _size(block, local, offset)
            pax_path = block[156] in _EXTENDED and _pax_has_path(f.read(size))
            yield _Header(offset, block, _stored_name(block), pax_path)
            offset += BLOCK + (size + BLOCK - 1) // BLOCK * BLOCK


def _size(block: bytes, local: str, offset: int) -> int:
    field_ = block[124:136]
    if field_[0] & 0x80:
        return int.from_bytes(field_[1:], "big")
    text = field_.split(b"\0", 1)[0].strip()
    if not text or not all(48 <= c <= 55 for c in text):
        raise FormatError(
            f"the tar header's size field {field_!r} is not an octal number.",
            path=local,
            offset=offset,
            hint="The shard is damaged; make it again.",
        )
    return int(text, 8)


def _pax_has_path(data: bytes) -> bool:
    keys = {line.split(b" ", 1)[-1].split(b"=", 1)[0] for line in data.split(b"\n")}
    return bool(keys & _PAX_PATH_KEYS)


def _stored_name(block: bytes) -> str:
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:263] == _POSIX_MAGIC and block[345]:
        name = block[345:500].split(b"\0", 1)[0] + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def _new_fields(block: bytes, new_name: str) -> tuple[bytes, bytes] | None:
    """(name field, prefix field) holding ``new_name``, or None when it does not fit."""
    raw = new_name.encode("utf-8", "surrogateescape")
    if len(raw) <= 100:
        return raw, b""
    if block[257:263] != _POSIX_MAGIC:  # only POSIX ustar headers have a prefix field
        return None
    cuts = [i for i, c in enumerate(raw) if c == ord("/") and i <= 155 and len(raw) - i - 1 <= 100]
    if not cuts:
        return None
    return raw[cuts[0] + 1 :], raw[: cuts[0]]


def _rename_members(local: str, prefix: str) -> None:
    """Prefix the name of every member of the tar file ``local`` in place."""
    renamed = [
        (h.offset, _renamed(h, prefix)) for h in _headers(local) if h.block[156] not in _EXTENDED
    ]
    with open(local, "r+b") as f:
        for offset, block in renamed:
            f.seek(offset)
            f.write(block)


def _renamed(header: _Header, prefix: str) -> bytes:
    fields = _new_fields(header.block, prefix + header.name)
    if fields is None:  # checked by the scan; the file changed in between
        raise FormatError(
            f"the new name of {header.name!r} does not fit its header.",
            path=prefix.rstrip("/"),
            offset=header.offset,
        )
    name, name_prefix = fields
    block = bytearray(header.block)
    block[0:100] = name.ljust(100, b"\0")
    if block[257:263] == _POSIX_MAGIC:
        block[345:500] = name_prefix.ljust(155, b"\0")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)
