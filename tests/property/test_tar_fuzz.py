"""Fuzzing the tar header walk: every input ends, within a time bound, in members or a FormatError.

Inputs are random bytes, and valid archives (GNU and pax, made by Python's tarfile) damaged by
overwriting bytes, whole header fields (with the checksum fixed so that the damage gets past
the first header's check) or pax records, and scanned from any block (as loading scans one
sample's bytes). A valid result must be sane: sizes >= 0, offsets strictly increasing, every
member inside the file.

The normal run tries a few hundred inputs per property; a longer run:
``STOKER_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest -q tests/property/test_tar_fuzz.py``.
"""

from __future__ import annotations

import io
import os
import signal
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stoker.errors import FormatError
from stoker.format.tar import BLOCK, TarMember, TarScan
from stoker.format.tar_index import encode_offsets, load_offsets

#: Seconds one input may take before it counts as a hang (real scans of these inputs take well
#: under a millisecond; the bound is for a walk that never ends, not a speed check: that the walk
#: stays linear is checked by counting its reads).
TIME_BOUND_S = 30.0
EXAMPLES = int(os.environ.get("STOKER_FUZZ_EXAMPLES", "300"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@contextmanager
def time_bound() -> Iterator[None]:
    """Fail (instead of hanging) when the body runs longer than ``TIME_BOUND_S``."""

    def fail(signum: int, frame: object) -> None:
        raise TimeoutError(f"the tar walk did not end within {TIME_BOUND_S} s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def scan(data: bytes, size: int | None = None) -> tuple[list[TarMember], int] | FormatError:
    """The members and end offset of ``data``, or the FormatError; anything else fails."""
    size = len(data) if size is None else size
    reads = 0

    def read(offset: int, n: int) -> bytes:
        nonlocal reads
        reads += 1
        return data[offset : offset + n]

    with time_bound():
        try:
            walk = TarScan(read, size, "fuzz.tar")
            result: tuple[list[TarMember], int] | FormatError = (list(walk), walk.end)
        except FormatError as e:
            result = e
    # Linear, counted: a header and at most one extension record per block of the input.
    assert reads <= 2 * (size // BLOCK + 2), f"{reads} reads for {size} bytes"
    return result


def check(data: bytes, size: int | None = None) -> None:
    size = len(data) if size is None else size
    result = scan(data, size)
    if isinstance(result, FormatError):
        assert result.path == "fuzz.tar" and result.problem
        assert result.offset is None or 0 <= result.offset <= size
        return
    members, end = result
    previous = 0  # where the member before ends: offsets only ever increase
    for member in members:
        assert member.size >= 0
        assert previous <= member.offset < member.data_offset
        assert member.data_offset + member.size <= size
        previous = member.data_offset + member.size
    assert previous <= end <= size


@st.composite
def archives(draw: st.DrawFn) -> bytes:
    """A valid tar of a few members (GNU or pax format, some names long or non-ASCII)."""
    fmt = draw(st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for i in range(draw(st.integers(1, 4))):
            stem = draw(st.sampled_from(["k", "ключ", "d/" * 60 + "k"]))
            data = draw(st.binary(max_size=1100))
            info = tarfile.TarInfo(f"{stem}{i}.{draw(st.sampled_from(['txt', 'json']))}")
            info.size = len(data)
            if fmt == tarfile.PAX_FORMAT and draw(st.booleans()):
                info.pax_headers = {"comment": draw(st.text(max_size=20))}
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def fix_checksum(data: bytearray, header: int) -> None:
    block = data[header : header + BLOCK]
    if len(block) == BLOCK:
        block[148:156] = b" " * 8
        data[header + 148 : header + 156] = b"%06o\0 " % sum(block)


FIELDS = [(0, 100), (124, 136), (148, 156), (156, 157), (257, 265), (345, 500)]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(archives()))
    blocks = len(data) // BLOCK
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["bytes", "field", "pax"]))
        if how == "bytes":
            at = draw(st.integers(0, len(data) - 1))
            data[at : at + 4] = draw(st.binary(min_size=1, max_size=4))
        elif how == "field":
            header = draw(st.integers(0, blocks - 1)) * BLOCK
            lo, hi = draw(st.sampled_from(FIELDS))
            value = field_value(draw, hi - lo)
            data[header + lo : header + hi] = value[: hi - lo].ljust(hi - lo, b"\0")
            fix_checksum(data, header)
        else:
            at = draw(st.integers(0, blocks - 1)) * BLOCK + BLOCK
            record = draw(st.sampled_from([b"0", b"1", b"9", b"99", b"-5", b"", b"a"])) + b" "
            record += draw(st.sampled_from([b"size=", b"path=", b"=", b"size=-1536", b"x"]))
            record += draw(st.binary(max_size=8)) + draw(st.sampled_from([b"\n", b""]))
            data[at : at + len(record)] = record
    return bytes(data[: len(data) - draw(st.integers(0, 3)) * draw(st.sampled_from([1, BLOCK]))])


def field_value(draw: st.DrawFn, width: int) -> bytes:
    """Raw bytes, a GNU base-256 number (negative too) or an octal number for a header field."""
    kind = draw(st.sampled_from(["raw", "base256", "octal"]))
    if kind == "raw":
        return draw(st.binary(min_size=width, max_size=width))
    if kind == "base256":
        raw = bytearray(
            (draw(st.integers(-(2**80), 2**80)) % (1 << (8 * width))).to_bytes(width, "big")
        )
        raw[0] |= 0x80
        return bytes(raw)
    return b"%0*o" % (width - 1, draw(st.integers(0, 8**11 - 1)))


@SETTINGS
@given(st.binary(max_size=3 * BLOCK))
def test_random_bytes(data: bytes) -> None:
    check(data)


@SETTINGS
@given(archives())
def test_valid_archives_match_tarfile(data: bytes) -> None:
    result = scan(data)
    assert not isinstance(result, FormatError)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        expected = [(m.name, m.offset, m.offset_data, m.size) for m in tar if m.isreg()]
    assert [(m.name, m.offset, m.data_offset, m.size) for m in result[0]] == expected


@SETTINGS
@given(damaged())
def test_damaged_archives(data: bytes) -> None:
    check(data)


@SETTINGS
@given(damaged(), st.integers(0, 40), st.integers(-2 * BLOCK, 2 * BLOCK))
def test_damaged_archives_from_any_block(data: bytes, block: int, extra: int) -> None:
    # Loading scans one sample's bytes; a reader may also return fewer bytes than the size says.
    part = data[block * BLOCK :]
    check(part, max(0, len(part) + extra))


@SETTINGS
@given(st.binary(max_size=80) | st.lists(st.integers(0, 2**64 - 1), max_size=8).map(encode_offsets))
def test_tar_index_at_load(data: bytes) -> None:
    result = load(data)
    if isinstance(result, FormatError):
        assert result.path == "fuzz.tar.idx" and "tar index" in result.problem
        return
    values = result.tolist()
    assert values and all(v < 2**63 for v in values) and values == sorted(values)


def load(data: bytes) -> npt.NDArray[np.uint64] | FormatError:
    try:
        return load_offsets(data, "fuzz.tar.idx")
    except FormatError as e:
        return e
