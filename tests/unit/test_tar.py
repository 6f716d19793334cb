"""The tar scanner against Python's tarfile, including long names, pax headers and damage."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import FormatError
from stoker.format.tar import TarScan, split_name
from tests.conftest import write_shard


def scan(path: Path) -> tuple[list[tuple[str, int, int, int]], int]:
    data = path.read_bytes()
    result = TarScan(lambda off, n: data[off : off + n], len(data), str(path))
    members = [(m.name, m.offset, m.data_offset, m.size) for m in result]
    return members, result.end


def reference(path: Path) -> tuple[list[tuple[str, int, int, int]], int]:
    with tarfile.open(path) as tar:
        members = [(m.name, m.offset, m.offset_data, m.size) for m in tar if m.isreg()]
        return members, tar.offset


member_names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\0/", exclude_categories=("Cs",)),
    min_size=1,
    max_size=150,
)


@settings(max_examples=60, deadline=None)
@given(
    files=st.lists(st.tuples(member_names, st.binary(max_size=1500)), min_size=1, max_size=8),
    fmt=st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT]),
    subdir=st.booleans(),
)
def test_scan_matches_python_tarfile(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, bytes]], fmt: int, subdir: bool
) -> None:
    path = tmp_path_factory.mktemp("tar") / "a.tar"
    with tarfile.open(path, "w", format=fmt) as tar:
        if subdir:
            info = tarfile.TarInfo("folder")
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, data in files:
            info = tarfile.TarInfo(("d/" if subdir else "") + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert scan(path) == reference(path)


def test_ustar_prefix_names(tmp_path: Path) -> None:
    path = tmp_path / "u.tar"
    long_dir = "/".join(["dir"] * 30)  # > 100 chars, fits ustar's prefix field
    write_shard(path, [(f"{long_dir}/k", {"txt": b"x"})], fmt=tarfile.USTAR_FORMAT)
    assert scan(path) == reference(path)
    assert scan(path)[0][0][0] == f"{long_dir}/k.txt"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("0001.jpg", ("0001", "jpg")),
        ("a/b/0001.seg.png", ("a/b/0001", "seg.png")),
        ("v1.2/0001.txt", ("v1.2/0001", "txt")),
        ("__meta__", None),
        ("__dir__/x.txt", None),
        ("noext", None),
        ("dir/.hidden", ("dir/", "hidden")),  # Energon's rule, kept for compatibility
    ],
)
def test_split_name(name: str, expected: tuple[str, str] | None) -> None:
    assert split_name(name) == expected


def test_gzip_is_refused_with_advice(tmp_path: Path) -> None:
    path = write_shard(tmp_path / "a.tar", [("k", {"txt": b"x"})])
    gz = tmp_path / "a.tar.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(FormatError, match="gzip") as info:
        scan(gz)
    assert "stoker pack" in info.value.message and str(gz) in info.value.message


def test_not_a_tar(tmp_path: Path) -> None:
    path = tmp_path / "a.tar"
    path.write_bytes(b"hello world" * 100)
    with pytest.raises(FormatError, match="not a tar archive"):
        scan(path)


def test_truncated_tar_names_offset(tmp_path: Path) -> None:
    path = write_shard(tmp_path / "a.tar", [("k1", {"txt": b"x" * 3000}), ("k2", {"txt": b"y"})])
    path.write_bytes(path.read_bytes()[:2048])
    with pytest.raises(FormatError, match="truncated") as info:
        scan(path)
    assert info.value.offset == 0
    assert "copy it again" in info.value.message


def test_a_last_member_whose_padding_is_cut_short_ends_the_archive_at_the_file_size(
    tmp_path: Path,
) -> None:
    full = tmp_path / "full.tar"
    with tarfile.open(full, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("a.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    cut = tmp_path / "cut.tar"
    cut.write_bytes(full.read_bytes()[: 512 + 100])  # the data whole, its padding and the end gone
    members, end = scan(cut)
    assert members == [("a.txt", 0, 512, 3)]
    assert end == 612  # not past the file (the padded member would end at 1024)
