"""Kill a training run with SIGKILL mid-epoch, resume it from its last checkpoint: every sample of
the epoch is consumed exactly once, and no process outlives the runs.

The training script is ``_crash_train.py`` (2 dataloader workers, one epoch, batches of 4 over 200
TextSamples); its docstring describes the exactly-once bookkeeping.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import write_shard

psutil = pytest.importorskip("psutil")

SCRIPT = Path(__file__).with_name("_crash_train.py")
REPO = Path(__file__).resolve().parents[2]
SHARDS, PER_SHARD = 10, 20
EVERY = 5
KILL_AT = 17  # the first run holds after step 17 (checkpoint 15 on disk) and is killed there


def make_dataset(root: Path) -> list[str]:
    keys = []
    for s in range(SHARDS):
        samples = [(f"s{s}_{i:02d}", {"txt": f"text {s}.{i}".encode()}) for i in range(PER_SHARD)]
        write_shard(root / f"shard_{s}.tar", samples)
        keys += [key for key, _ in samples]
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return keys


def start(dataset: Path, work: Path, run: int, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    with (work / f"run{run}.out").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, str(SCRIPT), str(dataset), str(work), "--every", str(EVERY), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own session: find every process it leaves behind
        )


def log_entries(work: Path) -> list[dict[str, Any]]:
    entries = []
    path = work / "consumed.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a line being written
    return entries


def checkpoint_step(work: Path) -> int:
    try:
        return int(json.loads((work / "ckpt.json").read_text())["step"])
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def session_processes(sid: int) -> list[Any]:
    """Live (non-zombie) processes of session ``sid``, wherever they were reparented."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def wait_gone(sid: int, timeout: float) -> list[Any]:
    deadline = time.monotonic() + timeout
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def kill_session(sid: int) -> None:
    """Last-resort cleanup of a run's session (only processes this test started)."""
    for proc in session_processes(sid):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def test_sigkill_mid_epoch_then_resume_consumes_every_sample_once(tmp_path: Path) -> None:
    keys = make_dataset(tmp_path / "ds")
    work = tmp_path / "work"
    work.mkdir()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    sessions: list[int] = []
    try:
        first = start(tmp_path / "ds", work, 1, "--hold-at", str(KILL_AT))
        sessions.append(first.pid)
        deadline = time.monotonic() + 180
        while not (work / "held.json").exists():  # kill between two checkpoints, at step 17
            assert first.poll() is None, (work / "run1.out").read_text()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.05)
        workers = first.pid, [p.pid for p in psutil.Process(first.pid).children(recursive=True)]
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
        assert not (work / "done.json").exists(), "the run finished before the kill"
        killed_at = checkpoint_step(work)
        logged = log_entries(work)[-1]["step"]
        # the resumed run drops the two steps after the checkpoint
        assert (killed_at, logged) == (KILL_AT - KILL_AT % EVERY, KILL_AT)
        # the orphaned dataloader workers notice that their parent died and exit by themselves
        left = wait_gone(first.pid, timeout=30)
        assert not left, f"workers {workers[1]} outlived the killed trainer: {left}"

        second = start(tmp_path / "ds", work, 2)
        sessions.append(second.pid)
        assert second.wait(timeout=180) == 0, (work / "run2.out").read_text()
        resumed = f"start at step {killed_at}, dropped {logged - killed_at} uncommitted steps"
        assert resumed in (work / "run2.out").read_text()
        assert not wait_gone(second.pid, timeout=30)
    finally:
        for sid in sessions:
            kill_session(sid)

    entries = log_entries(work)
    steps = [e["step"] for e in entries]
    assert steps == list(range(1, len(steps) + 1))
    assert json.loads((work / "done.json").read_text())["steps"] == len(steps)
    # the committed steps of the first run, then the second run from the checkpoint on
    pids = [e["pid"] for e in entries]
    assert pids == [first.pid] * killed_at + [second.pid] * (len(steps) - killed_at)
    consumed = collections.Counter(key for e in entries for key in e["keys"])
    assert not {k: n for k, n in consumed.items() if n > 1}, "samples consumed twice"
    assert sorted(consumed) == sorted(keys), "samples missing or unknown"
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
