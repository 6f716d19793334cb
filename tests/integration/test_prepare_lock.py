"""One prepare at a time per dataset: real prepare processes, at once, killed, and after a crash."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import make_dataset, snapshot
from tests.integration.test_prepare_resume import (
    _env,
    held_prepare,
    make_many_shards,
    prepare_command,
    wait_for,
)

LOCK = ".nv-meta/.stoker-work/prepare.lock"

#: A prepare through the library that indexes, says so, and waits for a line before publishing.
HOLDER = textwrap.dedent(
    """
    import sys
    from stoker.format.prepare import index_shards

    with index_shards(sys.argv[1], num_workers=1, overwrite=True) as pending:
        print("indexed", flush=True)
        sys.stdin.readline()
        pending.publish(split_ratio=[("train", 1.0)])
    print("published", flush=True)
    """
)


def _cli(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "stoker.cli", "prepare", str(path), "--non-interactive"]
    command += ["--split-ratio", "1,0,0", "--no-progress", *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A dataset, and a prepare of it that holds the lock until a line arrives on its stdin."""
    root = make_dataset(tmp_path / "ds")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "indexed"  # waits until the lock is held
    try:
        yield root, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_second_prepare_is_refused_while_one_runs(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    root, proc = holder
    lock = json.loads((root / LOCK).read_text())
    assert lock["pid"] == proc.pid

    second = _cli(root, "--force-overwrite")
    assert second.returncode != 0
    message = second.stderr
    assert "another `stoker prepare` of this dataset is running" in message
    assert f"pid {proc.pid} on host" in message and "since" in message
    assert str(root / LOCK) in message  # what to remove if that process is gone
    assert "Traceback" not in message
    assert (root / ".nv-meta" / ".stoker-work" / "chunks").is_dir()  # the first's work is intact

    out, _ = proc.communicate("go\n", timeout=120)  # the first publishes undisturbed
    assert proc.returncode == 0 and "published" in out
    assert not (root / LOCK).exists()  # released
    assert not (root / ".nv-meta" / ".stoker-work").exists()
    again = _cli(root, "--force-overwrite")  # now free
    assert again.returncode == 0, again.stderr


def test_two_cli_prepares_at_once_one_wins_and_the_dataset_is_whole(tmp_path: Path) -> None:
    root = make_many_shards(tmp_path / "ds", shards=40, per_shard=10)
    reference = make_many_shards(tmp_path / "ref", shards=40, per_shard=10)
    assert (
        subprocess.run(prepare_command(reference), capture_output=True, env=_env()).returncode == 0
    )
    procs = [
        subprocess.Popen(
            prepare_command(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
        )
        for _ in range(2)
    ]
    results = [(p.communicate(timeout=300)[1].decode(), p.returncode) for p in procs]
    assert sorted(code for _, code in results)[0] == 0  # one of them prepared the dataset
    for err, code in results:  # the other was refused (or started after the first published)
        refused = "another `stoker prepare` of this dataset is running" in err
        assert code == 0 or refused or "already prepared" in err, err
    got, expected = snapshot(root), snapshot(reference)
    assert sorted(got) == sorted(expected)
    assert not (root / ".nv-meta" / ".stoker-work").exists()


def test_lock_of_a_killed_prepare_is_taken_over(tmp_path: Path) -> None:
    root = make_many_shards(tmp_path / "ds")
    command = prepare_command(root)
    command[command.index("--num-workers") + 1] = "2"  # forked workers share the lock
    proc = held_prepare(command, tmp_path / "held", 4)  # a worker holds after 4 results
    wait_for(tmp_path / "held", proc)
    work = root / ".nv-meta" / ".stoker-work"
    assert json.loads((root / LOCK).read_text())["pid"] == proc.pid
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    after = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert after.returncode == 0, after.stderr
    assert "taking over the lock" in after.stderr
    assert f"pid {proc.pid} on host" in after.stderr
    assert json.loads(after.stdout)["resumed_shards"] >= 4  # the killed run's work was used
    assert not work.exists()


ORPHAN = textwrap.dedent(
    """
    import os, sys
    from stoker.format.prepare_lock import PrepareLock
    from stoker.storage import open_store

    PrepareLock(open_store(sys.argv[1])).acquire()
    child = os.fork()
    if child == 0:  # like an indexing worker: it inherited the locked file
        sys.stdin.readline()
        os._exit(0)
    print(child, flush=True)
    os._exit(0)  # the prepare dies without releasing; its child still holds the flock
    """
)


def test_lock_still_held_by_a_dead_prepares_child_is_taken_over(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds")
    proc = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.wait(timeout=60)
    try:
        dead = json.loads((root / LOCK).read_text())["pid"]
        assert dead == proc.pid
        after = _cli(root)
        assert after.returncode == 0, after.stderr
        assert "taking over the lock" in after.stderr and "gone" in after.stderr
        assert f"pid {dead} on host" in after.stderr
        assert (root / ".nv-meta" / ".info.json").exists()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the child reads EOF and ends
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(child).wait(timeout=60)
        proc.stdout.close()


def test_library_prepare_in_the_same_process_is_refused_then_free(tmp_path: Path) -> None:
    from stoker.errors import PrepareLockedError
    from stoker.format.prepare import index_shards, prepare_dataset

    root = make_dataset(tmp_path / "ds")
    other = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None
        assert other.stdout.readline().strip() == "indexed"
        with pytest.raises(PrepareLockedError, match=f"pid {other.pid}"):
            prepare_dataset(str(root), split_ratio="1,0,0", num_workers=1, overwrite=True)
        other.communicate("go\n", timeout=120)
        assert other.returncode == 0
    finally:
        if other.poll() is None:
            other.kill()
            other.communicate()
    with index_shards(str(root), num_workers=1, overwrite=True) as pending:
        assert (root / LOCK).exists()
        pending.publish(split_ratio=[("train", 1.0)])
    assert not (root / LOCK).exists()
