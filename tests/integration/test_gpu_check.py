"""``benchmarks/gpu_check.sh --cpu-only``: the GPU-machine check's smoke run, so that the script
prepared for a GPU machine does not rot between the rare runs on one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_cpu_only_smoke_run_writes_the_table(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [str(ROOT / "benchmarks/gpu_check.sh"), "--cpu-only", "--workers", "1", "--scaling", "1"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    table = (tmp_path / "gpu_table.md").read_text()
    assert "| images, CPU decode (torchrgb8) | 1 |" in table
    assert "| scaling, CPU decode | 1 |" in table and "1.00 of linear" in table
    assert "| clips, CPU decode (PyAV) | 1 |" in table
    results = json.loads((tmp_path / "gpu_results.json").read_text())
    assert results["errors"] == {}, results["errors"]
    assert results["cpu_images"]["1"] > 0 and results["cpu_clips"]["1"] > 0
