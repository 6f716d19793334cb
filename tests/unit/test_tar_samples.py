"""Reading tar samples: plain members take the one-pass path, everything else (pax and long-name
headers, name prefixes, damage) the full scanner, with the same samples and the same errors."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from stoker.errors import FormatError
from stoker.format.prepare import prepare_dataset
from stoker.format.tar import split_name
from stoker.format.tar_index import load_offsets
from stoker.format.tar_members import RawSample, parse_sample, parse_simple
from stoker.pipeline.read import ShardReader
from stoker.storage import open_store
from tests.conftest import write_shard

LONG = "d/" + "x" * 120  # a key longer than a ustar name field: a long-name or pax header


def samples() -> list[tuple[str, dict[str, bytes]]]:
    return [
        ("k0", {"txt": b"zero", "json": b'{"i": 0}'}),
        ("k1", {"txt": b"", "cls": b"1"}),
        (LONG, {"txt": b"long"}),
        ("k3", {"seg.png": b"\x89PNG" * 300}),
    ]


def all_raw(path: Path) -> list[RawSample]:
    reader = ShardReader(open_store(str(path.parent)), [path.name])
    offsets = load_offsets((path.parent / f"{path.name}.idx").read_bytes(), "idx")
    try:
        return [reader.read(0, i) for i in range(len(offsets) - 1)]
    finally:
        reader.close()


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_every_tar_format_reads_the_same_samples(tmp_path: Path, fmt: int) -> None:
    data = [s for s in samples() if fmt != tarfile.USTAR_FORMAT or s[0] != LONG]
    shard = write_shard(tmp_path / "ds" / "a.tar", data, fmt=fmt)
    prepare_dataset(str(shard.parent), split_ratio=[("train", 1.0)])
    raws = all_raw(shard)
    assert [(r.key, r.parts) for r in raws] == data
    blob = shard.read_bytes()
    offsets = load_offsets((shard.parent / "a.tar.idx").read_bytes(), "idx").tolist()
    for i, raw in enumerate(raws):  # the one-pass reader agrees with the full scanner
        chunk = blob[offsets[i] : offsets[i + 1]]
        full = parse_sample(chunk, "a.tar", "a.tar", i, offsets[i])
        assert raw == full
        simple = parse_simple(chunk)
        assert simple is None or simple == (full.key, full.parts)
        if raw.key == LONG and fmt != tarfile.USTAR_FORMAT:
            assert simple is None  # extended headers: the full scanner


def one_member_ustar() -> bytes:
    """A ustar header of member ``k.txt`` and its data block (``abc``), no end marker."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("k.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    return out.getvalue()[:1024]


def test_a_damaged_header_fails_as_the_full_scanner_says() -> None:
    good = one_member_ustar()
    assert parse_simple(good) == ("k", {"txt": b"abc"})
    bad = good[:10] + b"?" + good[11:]  # the checksum no longer matches
    assert parse_simple(bad) is None
    with pytest.raises(FormatError, match="header is invalid"):
        parse_sample(bad, "s.tar", "s.tar", 0, 0)
    twice = good + good  # the same part twice: WebDataset refuses it
    assert parse_simple(twice) is None
    with pytest.raises(FormatError, match="occurs twice"):
        parse_sample(twice, "s.tar", "s.tar", 0, 0)
    assert parse_simple(good[:514]) is None  # cut inside the data
    with pytest.raises(FormatError, match="truncated"):
        parse_sample(good[:514], "s.tar", "s.tar", 0, 0)
    assert parse_simple(b"") is None


def test_the_inline_checks_take_and_refuse_what_checksum_ok_and_split_name_do() -> None:
    good = bytearray(one_member_ustar())
    good[3] = 0xE9  # a name byte > 127: the signed and unsigned sums differ
    header = bytes(good[:148]) + b" " * 8 + bytes(good[156:512])
    signed = sum(b - 256 if b > 127 else b for b in header)
    good[148:156] = b"%06o\0 " % signed  # the signed sum, as some old tar programs wrote it
    chunk = bytes(good)
    full = parse_sample(chunk, "s.tar", "s.tar", 0, 0)
    assert parse_simple(chunk) == (full.key, full.parts)
    meta = bytearray(one_member_ustar())  # a meta member (no sample): the full scanner
    meta[0:11] = b"__d__/k.txt"
    meta[148:156] = b"%06o\0 " % (sum(bytes(meta[:148]) + b" " * 8 + bytes(meta[156:512])))
    assert split_name("__d__/k.txt") is None and parse_simple(bytes(meta)) is None
