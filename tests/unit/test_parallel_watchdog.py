"""A prepare worker ends soon after the process that started it is killed, even mid-task."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psutil

# The middle process forks a worker that runs the watchdog and then "works" for ten minutes.
MIDDLE = textwrap.dedent(
    """
    import os, sys, time
    from stoker.format.parallel import watch_parent

    parent = os.getpid()
    child = os.fork()
    if child == 0:
        watch_parent(parent)
        time.sleep(600)
        os._exit(0)
    print(child, flush=True)
    time.sleep(60)
    """
)


def test_worker_ends_within_seconds_of_its_parent_being_killed() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", MIDDLE], stdout=subprocess.PIPE, text=True
    ) as middle:
        assert middle.stdout is not None
        worker = psutil.Process(int(middle.stdout.readline()))
        assert worker.is_running()
        os.kill(middle.pid, signal.SIGKILL)
        middle.wait()
    # Within a minute: long on a loaded machine for a watchdog, short of the 10 minutes of work.
    _gone, alive = psutil.wait_procs([worker], timeout=60)
    if alive:  # clean up before failing
        for process in alive:
            process.kill()
    assert not alive, "the worker kept running after its parent was killed"
