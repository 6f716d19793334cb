"""A dataloader worker killed with SIGKILL leaves no ``pymp-*`` folder in TMPDIR: workers use
the main process's temporary folder, which it removes when it exits."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import multiprocessing, os, signal, sys, tempfile
    from pathlib import Path
    from stoker import WorkerConfig, get_loader, get_train_dataset
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset
    from tests.conftest import write_shard
    from tests.integration.test_lint_decode import jpeg

    root = Path(sys.argv[1])
    for s in range(2):
        samples = [(f"k{s}_{i}", {"jpg": jpeg(i), "txt": b"x"}) for i in range(40)]
        write_shard(root / f"s{s}.tar", samples)
    yaml = make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"})
    prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=yaml, num_workers=1)
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = get_train_dataset(str(root), worker_config=wc, batch_size=2,
                           shuffle_buffer_size=None, max_samples_per_sequence=None)
    it = iter(get_loader(ds))
    next(it)  # image tensors have crossed from the workers
    folders = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("pymp-")]
    print("pymp folders while running:", len(folders))
    os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)
    stopped = []
    for _ in range(3):  # torch's SIGCHLD handler may raise again while the first error unwinds
        try:
            try:
                if not stopped:
                    for _ in range(1000):
                        next(it)
            finally:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            break
        except Exception as e:
            stopped.append(type(e).__name__)
    print("stopped:", stopped[0] if stopped else None)
    """
)


def test_killed_worker_leaves_no_pymp_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "ds")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "pymp folders while running: 1" in result.stdout  # the main process's only
    # the worker's death was reported (by stoker, or first by torch's SIGCHLD handler)
    assert "stopped: StokerError" in result.stdout or "stopped: RuntimeError" in result.stdout
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("pymp-")) == []
