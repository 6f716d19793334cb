"""The values ``pack`` works with: samples, their parts, and the source files it skipped.

A :class:`Sample` is a key and its parts; a :class:`Part` is a byte range of a source file; a
:class:`SkippedFile` is a source file in no sample, and why.

Member names are ``<key>.<part>`` encoded as :data:`ENCODING`, in the tar headers and in the
size plan alike.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The encoding of member names in the tar headers.
ENCODING = "utf-8"


@dataclass(frozen=True)
class SkippedFile:
    """A file (or hidden folder) of the source that is not in any sample, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Part:
    """One member to write: ``size`` bytes of the file ``path`` from ``offset`` (or ``data``)."""

    name: str
    path: str
    offset: int
    size: int
    #: The member's bytes themselves, where they are no file's range (a Parquet row's value).
    data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """A sample key and its parts; its members are named ``<key>.<part>``."""

    key: str
    parts: tuple[Part, ...]
