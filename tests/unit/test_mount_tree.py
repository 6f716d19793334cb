"""The file tree of ``stoker mount`` and its filesystem calls, without FUSE."""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

import fsspec
import pytest

from stoker import prepare_dataset
from stoker.errors import StokerError
from stoker.format.mount import DatasetTree, MountOperations
from tests.conftest import write_shard

SAMPLES = {
    "a/0001": {"jpg": b"J" * 700, "txt": b"first"},
    "a/0002": {"jpg": b"K" * 10, "txt": b"second"},
    "b/0003": {"seg.png": b"P" * 3, "txt": b""},
}


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    items = list(SAMPLES.items())
    write_shard(root / "s0.tar", items[:2])
    write_shard(root / "sub/s1.tar", items[2:])
    prepare_dataset(str(root), split_ratio="1,0,0")
    return root


def test_flat_layout_is_key_dot_part(dataset: Path) -> None:
    tree = DatasetTree(str(dataset))
    assert tree.listdir("") == ["a", "b"]  # keys with '/' make sub-folders
    assert tree.listdir("a") == ["0001.jpg", "0001.txt", "0002.jpg", "0002.txt"]
    assert tree.listdir("b") == ["0003.seg.png", "0003.txt"]
    assert tree.files == 6 and tree.bytes == sum(
        len(d) for p in SAMPLES.values() for d in p.values()
    )
    for key, parts in SAMPLES.items():
        for part, data in parts.items():
            assert tree.read(f"{key}.{part}", 0, 1 << 20) == data
    assert tree.read("a/0001.jpg", 690, 100) == b"J" * 10  # a range, cut at the end
    assert tree.read("a/0001.jpg", 700, 5) == b"" and tree.read("b/0003.txt", 0, 9) == b""


def test_sample_folders_layout(dataset: Path) -> None:
    tree = DatasetTree(str(dataset), sample_folders=True)
    assert tree.listdir("a") == ["0001", "0002"]
    assert tree.listdir("a/0001") == ["jpg", "txt"]
    assert tree.lookup("a/0001") is None  # a folder
    entry = tree.lookup("b/0003/seg.png")
    assert entry is not None and (entry.shard, entry.size) == ("sub/s1.tar", 3)
    assert tree.read("a/0002/txt", 1, 3) == b"eco"


def test_missing_paths_and_wrong_kinds(dataset: Path) -> None:
    tree = DatasetTree(str(dataset))
    with pytest.raises(FileNotFoundError):
        tree.lookup("a/0009.jpg")
    with pytest.raises(FileNotFoundError):
        tree.listdir("nope")
    with pytest.raises(NotADirectoryError):
        tree.listdir("a/0001.jpg")
    with pytest.raises(IsADirectoryError):
        tree.read("a", 0, 10)


def test_operations_answer_as_a_read_only_filesystem(dataset: Path) -> None:
    ops = MountOperations(DatasetTree(str(dataset), sample_folders=True), mtime=1234.0)
    top = ops.getattr("/")
    assert stat.S_ISDIR(top["st_mode"]) and top["st_mode"] & 0o777 == 0o555
    part = ops.getattr("/a/0001/jpg")
    assert stat.S_ISREG(part["st_mode"]) and part["st_mode"] & 0o222 == 0
    assert part["st_size"] == 700 and part["st_mtime"] == 1234 and part["st_uid"] == os.getuid()
    assert ops.readdir("/") == [".", "..", "a", "b"]
    assert ops.readdir("/a/0002") == [".", "..", "jpg", "txt"]
    assert ops.open("/a/0001/txt", os.O_RDONLY) == 0
    assert ops.read("/a/0001/txt", 3, 2) == b"rst"  # FUSE's order: size, then offset
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_APPEND):
        with pytest.raises(OSError, match="read-only") as e:
            ops.open("/a/0001/txt", flags)
        assert e.value.errno == errno.EROFS
    for call in (lambda: ops.getattr("/zzz"), lambda: ops.readdir("/a/zzz")):
        with pytest.raises(OSError, match="no such file") as e:
            call()
        assert e.value.errno == errno.ENOENT
    with pytest.raises(OSError, match="is a folder") as e:
        ops.open("/a", os.O_RDONLY)
    assert e.value.errno == errno.EISDIR
    assert ops.statfs("/")["f_blocks"] == 2  # 724 bytes in 512-byte blocks, rounded up


def test_unprepared_folder_is_a_stoker_error(tmp_path: Path) -> None:
    write_shard(tmp_path / "s0.tar", list(SAMPLES.items()))
    with pytest.raises(StokerError) as e:
        DatasetTree(str(tmp_path))
    assert "stoker prepare" in str(e.value)


def test_remote_dataset_is_read_by_ranges(dataset: Path, tmp_path: Path) -> None:
    fs = fsspec.filesystem("memory")
    url = f"memory://stoker-{uuid.uuid4().hex}"
    for path in dataset.rglob("*"):
        if path.is_file():
            fs.pipe(f"{url}/{path.relative_to(dataset).as_posix()}", path.read_bytes())
    try:
        tree = DatasetTree(url, sample_folders=True)
        assert tree.listdir("b/0003") == ["seg.png", "txt"]
        assert tree.read("a/0001/jpg", 100, 5) == b"JJJJJ"
        assert tree.read("b/0003/seg.png", 0, 10) == b"PPP"
    finally:
        fs.rm(url, recursive=True)
