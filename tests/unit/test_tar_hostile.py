"""Crafted tar headers end in a clean FormatError, in ``prepare``, ``lint`` and loading.

Each case once sent the header walk back to an earlier header (a hang) or raised a raw
exception: a pax record of length 0, a negative size (pax or GNU base-256), a non-numeric pax
size, a pax record length past its data. Every test runs under an alarm so that a regression
fails instead of hanging the suite.
"""

from __future__ import annotations

import io
import signal
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import WorkerConfig, get_loader, get_val_dataset, prepare_dataset
from stoker.errors import FormatError, StokerError
from stoker.format import tar_index
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.lint import lint_dataset
from stoker.format.tar import BLOCK, TarScan
from stoker.format.tar_index import encode_offsets, load_offsets, map_offsets
from stoker.sources.load import load_source
from tests.conftest import text_samples, write_shard

TEXT = make_dataset_yaml("TextSample", {"text": "txt"})
TIME_LIMIT_S = 120


@pytest.fixture(autouse=True)
def time_bound() -> Iterator[None]:
    def fail(signum: int, frame: object) -> None:
        raise TimeoutError(f"did not end within {TIME_LIMIT_S} s (the header walk hangs?)")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(TIME_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def header(name: str, kind: bytes, size_field: bytes) -> bytes:
    """A ustar header block with a valid checksum and the raw 12-byte ``size_field``."""
    block = bytearray(BLOCK)
    block[0 : len(name)] = name.encode()
    block[100:108] = b"0000644\0"
    block[124:136] = size_field
    block[136:148] = b"00000000000\0"
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % BLOCK)


def regular(name: str, data: bytes) -> bytes:
    return header(name, b"0", b"%011o\0" % len(data)) + padded(data)


def pax(records: bytes) -> bytes:
    return header("././@PaxHeader", b"x", b"%011o\0" % len(records)) + padded(records)


def archive(*members: bytes) -> bytes:
    good = regular("a.txt", b"first") + regular("b.txt", b"second")
    return good + b"".join(members) + regular("c.txt", b"third") + b"\0" * (2 * BLOCK)


NEGATIVE_BASE256 = ((1 << 96) - 1536).to_bytes(12, "big")
CASES = {
    "pax record length 0": (archive(pax(b"00 size=5\n")), "pax record"),
    "pax size -1536": (archive(pax(b"14 size=-1536\n")), "pax size"),
    "GNU base-256 size -1536": (
        archive(header("x.txt", b"0", NEGATIVE_BASE256) + padded(b"x" * 600)),
        "negative",
    ),
    "non-numeric pax size": (archive(pax(b"12 size=abc\n")), "pax size"),
    "pax record length past its data": (archive(pax(b"99 size=5\n")), "pax record"),
    "pax record length inside its key": (archive(pax(b"4 size=5\n")), "pax record"),
    "pax record without length": (archive(pax(b"size=5\n")), "pax record"),
    "pax length with 5000 digits": (archive(pax(b"9" * 5000 + b" a=b\n")), "pax record"),
}


def scan(data: bytes) -> list[str]:
    return [m.name for m in TarScan(lambda off, n: data[off : off + n], len(data), "s.tar")]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_scan_gives_a_clean_error(case: str) -> None:
    data, field = CASES[case]
    with pytest.raises(FormatError, match=field) as info:
        scan(data)
    assert info.value.path == "s.tar"
    assert info.value.offset is not None and 2 * 2 * BLOCK <= info.value.offset < len(data)
    assert "s.tar, byte offset" in info.value.message


def test_the_crafted_members_are_otherwise_valid() -> None:
    # The same archive with a sound pax record is read in full: the damage is the only problem.
    assert scan(archive(pax(b"10 size=5\n" + b"\0" * 6))) == ["a.txt", "b.txt", "c.txt"]
    assert scan(archive(pax(b"13 comment=x\n"), regular("d.txt", b""))) == [
        "a.txt", "b.txt", "d.txt", "c.txt",
    ]  # fmt: skip


def test_short_reads_are_a_clean_error() -> None:
    data = archive()[: -2 * BLOCK]  # no end marker: the reader returns less than the size says
    with pytest.raises(FormatError, match="truncated"):
        list(TarScan(lambda off, n: data[off : off + n], len(data) + 4 * BLOCK, "s.tar"))


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_prepare_and_lint_give_a_clean_error(tmp_path: Path, case: str) -> None:
    root = tmp_path / "ds"
    write_shard(root / "good.tar", text_samples("g", 3))
    (root / "bad.tar").write_bytes(CASES[case][0])
    with pytest.raises(FormatError, match=CASES[case][1]) as info:
        prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=TEXT, num_workers=2)
    assert info.value.path is not None and "bad.tar" in info.value.path
    # lint of a prepared dataset whose shard was damaged afterwards reports it, and ends.
    (root / "bad.tar").unlink()
    prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=TEXT)
    damaged = CASES[case][0]
    (root / "good.tar").write_bytes(damaged)
    report = lint_dataset(str(root))
    assert any(CASES[case][1] in f.problem for f in report.findings), report.findings


def prepared_with_pax(root: Path) -> tuple[Path, int]:
    """A prepared dataset whose one shard has pax headers; the offset of a pax record's length."""
    samples = [(k, {"txt": v["txt"]}) for k, v in text_samples("p", 6)]
    path = root / "pax.tar"
    path.parent.mkdir(parents=True)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for key, parts in samples:
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = len(parts["txt"])
            info.pax_headers = {"comment": "hello"}
            tar.addfile(info, io.BytesIO(parts["txt"]))
    prepare_dataset(str(root), split_parts=[("val", "pax")], dataset_yaml=TEXT)
    data = path.read_bytes()
    record = data.index(b" comment=hello\n", data.index(b"p00003.txt")) - 2
    assert data[record : record + 2] == b"%d" % len(b"17 comment=hello\n")
    return path, record


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("length", [b"00", b"01", b"99"])
def test_loading_a_damaged_pax_length_gives_a_clean_error(
    tmp_path: Path, workers: int, length: bytes
) -> None:
    path, record = prepared_with_pax(tmp_path / "ds")
    data = bytearray(path.read_bytes())
    data[record : record + 2] = length
    path.write_bytes(bytes(data))
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_val_dataset(str(tmp_path / "ds"), worker_config=config, batch_size=2)
    with pytest.raises(StokerError, match="pax record"):
        read_all(dataset)


def read_all(dataset: Any) -> int:
    with get_loader(dataset) as loader:
        return sum(len(batch.__key__) for batch in loader)


@pytest.mark.parametrize(
    ("offsets", "problem"),
    [
        ([0, 1 << 63, 2048], "beyond 2\\^63"),
        ([0, 2048, 1024, 4096], "entry 2 \\(1024\\) is smaller"),
    ],
)
def test_load_offsets_refuses_damaged_indexes(offsets: list[int], problem: str) -> None:
    with pytest.raises(FormatError, match=problem):
        load_offsets(encode_offsets(offsets), "a.tar.idx")


@pytest.mark.parametrize(
    ("at", "bad", "problem"),
    [
        (3, 1 << 63, "entry 3 is 9223372036854775808, beyond"),
        (
            4,
            1,
            "entry 4 \\(1\\) is smaller",
        ),  # the first of a block, below the last of the one before
        (9, 1, "entry 9 \\(1\\) is smaller"),
        (10, 1 << 63, "entry 10 is"),
    ],
)
def test_a_mapped_index_is_checked_block_by_block_as_a_read_one_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int, bad: int, problem: str
) -> None:
    monkeypatch.setattr(tar_index, "_CHECK_BLOCK", 4)
    index = tmp_path / "a.jsonl.idx"
    good = list(range(0, 1100, 100))
    index.write_bytes(encode_offsets(good))
    mapped = map_offsets(str(index), "s3://b/a.jsonl.idx")
    assert mapped.tolist() == good and not mapped.flags.writeable
    offsets = list(good)
    offsets[at] = bad
    index.write_bytes(encode_offsets(offsets))
    for load in (lambda: map_offsets(str(index), "s3://b/a.jsonl.idx"),
                 lambda: load_offsets(index.read_bytes(), "s3://b/a.jsonl.idx")):  # fmt: skip
        with pytest.raises(FormatError, match=f"invalid tar index: {problem}") as info:
            load()
        assert info.value.path == "s3://b/a.jsonl.idx"
    index.write_bytes(encode_offsets(good)[:-3])
    with pytest.raises(FormatError, match="85 bytes is not a positive multiple of 8"):
        map_offsets(str(index), "a.jsonl.idx")


def test_a_jsonl_index_of_a_bad_size_is_a_clean_error(tmp_path: Path) -> None:
    # The dataset counts its lines from the index's size, without reading it.
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(5)))
    prepare_jsonl(str(path))
    assert load_source(str(path)).counts.tolist() == [5]
    index = tmp_path / "lines.jsonl.idx"
    index.write_bytes(index.read_bytes()[:-1])
    with pytest.raises(FormatError, match="47 bytes is not a positive multiple of 8") as info:
        load_source(str(path))
    assert info.value.path == str(index)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("bad", [1 << 63, 2**64 - 1, 1])
def test_loading_a_damaged_tar_index_gives_a_clean_error(
    tmp_path: Path, workers: int, bad: int
) -> None:
    path, _ = prepared_with_pax(tmp_path / "ds")
    index = path.with_name(path.name + ".idx")
    offsets = load_offsets(index.read_bytes(), str(index)).tolist()
    offsets[3] = bad  # past 2^63, or smaller than the entry before it
    index.write_bytes(encode_offsets(offsets))
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_val_dataset(str(tmp_path / "ds"), worker_config=config, batch_size=2)
    with pytest.raises(FormatError, match="invalid tar index: entry 3") as info:
        read_all(dataset)
    assert info.value.path is not None and info.value.path.endswith("pax.tar.idx")
