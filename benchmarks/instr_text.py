"""Instructions per sample of ``bench_text.py``'s stoker loader at W=0, in the steady state.

Runs itself under ``valgrind --tool=callgrind`` with instrumentation off, iterates the loader
for ``--warmup`` batches, turns instrumentation on (``callgrind_control -i on``) for ``--batches``
batches with the collector off, and prints the instructions per sample: a figure that does not
move with the other jobs on the machine (``PYTHONHASHSEED=0``, one BLAS thread). The callgrind
file (``--out``) can be read with ``callgrind_annotate``.

Usage::

    python benchmarks/instr_text.py jsonl                  # 16 batches of 256 after 20
    python benchmarks/instr_text.py tiny --batches 128     # 128 batches of 32 after 20
    PYTHONPATH=/tmp/base/src python benchmarks/instr_text.py jsonl   # another stoker tree
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _text import WORKLOADS, ensure_jsonl, ensure_tiny, open_loader

REPO = Path(__file__).resolve().parent.parent


def measure(workload: str, warmup: int, batches: int) -> None:
    """Inside valgrind: iterate, with instrumentation on for ``batches`` batches only."""
    data = REPO / "bench-data"
    path = ensure_jsonl(data) if workload == "jsonl" else ensure_tiny(data).path
    batch_iter = iter(open_loader("stoker", workload, 0, path))
    for _ in range(warmup):
        next(batch_iter)
    gc.collect()
    gc.disable()
    control = ["callgrind_control", "-i"]
    subprocess.run([*control, "on", str(os.getpid())], check=True, capture_output=True)
    for _ in range(batches):
        next(batch_iter)
    subprocess.run([*control, "off", str(os.getpid())], check=True, capture_output=True)
    os._exit(0)  # (the interpreter's exit is not measured either way)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=list(WORKLOADS))
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--out", default="/tmp/instr_text.callgrind")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        measure(args.workload, args.warmup, args.batches)
        return 0
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={args.out}",
        sys.executable, __file__, args.workload, "--inside",
        f"--warmup={args.warmup}", f"--batches={args.batches}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        print(proc.stderr[-3000:], file=sys.stderr)
        return 1
    per_sample = int(found.group(1)) / (args.batches * WORKLOADS[args.workload])
    print(f"{args.workload}: {per_sample:,.0f} instructions per sample ({args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
