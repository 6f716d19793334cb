"""``stoker prepare``'s wizard in a real terminal (a pty driven by pexpect), and without one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from stoker.cli.wizard import SAMPLE_TYPE_MENU
from tests.conftest import snapshot

pexpect = pytest.importorskip("pexpect", reason="pexpect is in the dev dependency group")

SPLIT = "split like"
CREATE = "create a dataset.yaml"
TYPE = "number to choose a class"
FIELD_MAP = "simple field_map"
TEXT_FIELD = "field name for 'text'"
TEXT_TYPE = [name for _, name in SAMPLE_TYPE_MENU].index("TextSample")


def default_ctrl_c() -> None:
    """In the child, before it runs: Ctrl-C's default action, as a shell gives a command it runs
    in the foreground. A suite run as a background job (``make test &``) has SIGINT ignored, and
    a Python started with it ignored installs no KeyboardInterrupt handler: Ctrl-C would do
    nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(*args: str) -> pexpect.spawn:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "stoker.cli.main", *args],
        env=env,
        encoding="utf-8",
        timeout=60,
        use_poll=True,  # select() refuses descriptors above 1024
        preexec_fn=default_ctrl_c,
    )
    child.setwinsize(40, 200)
    return child


#: Linux x86-64 system calls a process waiting for terminal input sits in: read, poll, select,
#: pselect6, ppoll.
_WAITING_CALLS = {0, 7, 23, 270, 271}


def wait_for_input(child: pexpect.spawn) -> None:
    """Return once ``child`` waits for an answer (its main thread blocked reading the terminal,
    per /proc/PID/syscall), not merely once the question is printed."""
    deadline = time.monotonic() + 60
    while True:
        with open(f"/proc/{child.pid}/syscall") as f:
            call = f.read().split()
        number = int(call[0]) if call and call[0].isdigit() else -1
        if number in _WAITING_CALLS and (number != 0 or int(call[1], 16) == 0):  # read: of fd 0
            return
        assert time.monotonic() < deadline, f"prepare never waited for input: {call}"
        time.sleep(0.01)


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus if child.exitstatus is not None else -(child.signalstatus or 0))


def test_happy_path_with_a_bad_answer_times_only_the_work(dataset_dir: Path) -> None:
    think = 5.0
    began = time.monotonic()
    child = spawn("prepare", str(dataset_dir), "--media-metadata-by-header")
    child.expect(SPLIT)
    assert "Indexed" not in child.before and "media" not in child.before  # asked before probing
    child.sendline("eight, one, one")  # a bad answer: asked again
    child.expect("split")
    child.expect(SPLIT)
    child.sendline("8,1,1")
    child.expect(CREATE)
    child.sendline("y")
    child.expect(TYPE)
    child.sendline(str(TEXT_TYPE))
    child.expect(FIELD_MAP)
    child.sendline("y")
    child.expect(TEXT_FIELD)
    time.sleep(think)  # the user thinks: not part of the reported time
    child.sendline("md")  # no sample has an md part: asked again
    child.expect("which no sample has")
    child.expect(TEXT_FIELD)
    child.sendline("txt")
    child.expect(r"Prepared \S+ in ([0-9.]+) s")
    total = time.monotonic() - began
    seconds = float(child.match.group(1))
    assert finish(child) == 0, child.before
    # What the run took, less the thinking at least (its rounding aside): bounded by this test's
    # own clock, not by a fixed 1.5 s.
    assert seconds <= total - think + 0.01, f"the reported {seconds} s includes the answering"
    dataset_yaml = yaml.safe_load((dataset_dir / ".nv-meta/dataset.yaml").read_text())
    assert dataset_yaml["field_map"] == {"text": "txt"}
    assert (dataset_dir / ".nv-meta/index.sqlite").exists()


def test_ctrl_c_leaves_the_dataset_as_it_was(dataset_dir: Path) -> None:
    before = snapshot(dataset_dir)
    child = spawn("prepare", str(dataset_dir), "--no-progress")
    child.expect(SPLIT)
    child.sendline("1,0,0")
    child.expect(CREATE)
    child.sendline("y")
    child.expect(TYPE)
    child.sendline(str(TEXT_TYPE))
    child.expect(FIELD_MAP)  # the shards are indexed into temporary files by now
    wait_for_input(child)  # the user reads the question
    child.sendintr()
    child.expect("interrupted; nothing was changed")
    assert finish(child) == 130
    assert "Traceback" not in child.before
    assert snapshot(dataset_dir) == before
    assert not (dataset_dir / ".nv-meta").exists()  # not even an empty folder


def test_no_terminal_fails_at_once_with_what_to_do(dataset_dir: Path) -> None:
    before = snapshot(dataset_dir)
    result = subprocess.run(  # did it wait for input, it would time out
        [sys.executable, "-m", "stoker.cli.main", "prepare", str(dataset_dir)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 2
    assert "--non-interactive" in result.stderr and "not a terminal" in result.stderr
    assert "Traceback" not in result.stderr and "Aborted!" not in result.stderr
    assert re.search(r"^error: ", result.stderr, re.MULTILINE)
    assert snapshot(dataset_dir) == before and not (dataset_dir / ".nv-meta").exists()
