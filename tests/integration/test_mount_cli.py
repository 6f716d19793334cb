"""``stoker mount`` through FUSE, where this machine can mount (else skipped, saying why).

The tree and the filesystem calls are tested without FUSE in tests/unit/test_mount_tree.py.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker import prepare_dataset
from tests.conftest import text_samples, write_shard

STOKER = [sys.executable, "-m", "stoker.cli.main"]


def fuse_unusable() -> str | None:
    """Why FUSE cannot mount here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "neither fusermount3 nor fusermount is installed"
    try:
        importlib.import_module("mfusepy")
    except (ImportError, OSError) as e:
        return f"mfusepy cannot be used: {e}"
    return None


WHY = fuse_unusable()


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    write_shard(root / "s0.tar", text_samples("k", 3))
    write_shard(root / "s1.tar", text_samples("m", 2))
    prepare_dataset(str(root), split_ratio="1,0,0")
    return root


def wait_mounted(mountpoint: Path, proc: subprocess.Popen[str] | None) -> None:
    deadline = time.monotonic() + 20
    while not os.path.ismount(mountpoint):
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"stoker mount exited {proc.returncode}: {proc.communicate()}")
        if time.monotonic() > deadline:
            pytest.fail("the mount did not appear within 20 s")
        time.sleep(0.1)


def unmount(mountpoint: Path) -> None:
    fusermount = shutil.which("fusermount3") or shutil.which("fusermount")
    assert fusermount is not None
    subprocess.run([fusermount, "-u", str(mountpoint)], check=True, timeout=30)


@pytest.fixture
def mountpoint(tmp_path: Path) -> Iterator[Path]:
    point = tmp_path / "mnt"
    yield point
    if os.path.ismount(point):
        unmount(point)


@pytest.mark.skipif(WHY is not None, reason=f"FUSE cannot mount here: {WHY}")
def test_mount_shows_sample_folders_with_their_parts(dataset: Path, mountpoint: Path) -> None:
    proc = subprocess.Popen(
        [*STOKER, "mount", str(dataset), str(mountpoint), "--sample-folders"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_mounted(mountpoint, proc)
        assert sorted(os.listdir(mountpoint)) == ["k00000", "k00001", "k00002", "m00000", "m00001"]
        assert sorted(os.listdir(mountpoint / "k00001")) == ["json", "txt"]
        assert (mountpoint / "m00001/txt").read_bytes() == b"caption m1"
        with pytest.raises(OSError, match=r"Read-only|Permission denied"):
            (mountpoint / "m00001/txt").write_bytes(b"x")
    finally:
        if os.path.ismount(mountpoint):
            unmount(mountpoint)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Mounting" in out and "10 files" in out


@pytest.mark.skipif(WHY is not None, reason=f"FUSE cannot mount here: {WHY}")
def test_detached_flat_mount(dataset: Path, mountpoint: Path) -> None:
    done = subprocess.run(
        [*STOKER, "mount", str(dataset), str(mountpoint), "-d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    wait_mounted(mountpoint, None)
    assert "k00000.txt" in os.listdir(mountpoint)
    assert (mountpoint / "k00002.json").read_bytes() == b'{"i": 2}'


@pytest.mark.skipif(WHY is None, reason="FUSE is usable here: the mount tests run instead")
def test_without_fuse_the_error_is_one_line_with_what_to_install(
    dataset: Path, mountpoint: Path
) -> None:
    done = subprocess.run(
        [*STOKER, "mount", str(dataset), str(mountpoint)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "stoker mount needs" in done.stderr
    assert "pip install 'stoker[mount]'" in done.stderr or "apt-get install" in done.stderr
    assert not mountpoint.exists()  # nothing made before the check
