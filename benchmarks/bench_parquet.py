"""Benchmark Parquet rows: stoker (shuffled) vs a sequential pyarrow loop vs datasets + DataLoader.

The data: ``--rows`` rows (default 200 000) of a ~500 B text column and an int column in 4 files,
row groups of 5 000 rows, written once with pyarrow under ``--data``. Each configuration runs in a
fresh subprocess, alternating the tools, ``--repeats`` times; the table shows medians.

- ``bare``: ``ParquetFile.iter_batches`` over the files in order, each batch ``to_pylist()``: a
  dict per row, no shuffling (the physical floor for a row-per-sample reader).
- ``stoker``: ``get_train_dataset`` on the folder, crude samples, ``shuffle_buffer_size=1000``,
  ``max_samples_per_sequence=100``, batches of 256, one epoch, at W = 0 and 2 dataloader workers.
- ``datasets``: Hugging Face ``Dataset.from_parquet`` (its Arrow cache built before timing) in a
  torch ``DataLoader(shuffle=True, batch_size=256)`` at W = 0 and 2.

Imports are not timed. The table shows medians of rows/s over the whole run (the loader's
start-up included), the seconds to the first batch, rows/s after it (the steady rate, what a
long epoch sees), CPU time per row (the run's processes together: on a loaded machine a steadier
measure of the work than the wall clock) and the peak memory of the run's process tree (the sum
of PSS over the live processes, polled every 0.1 s: ``bench_prepare.TreeMemoryPoller``); then
the ratios of stoker to the others.

Usage::

    python benchmarks/bench_parquet.py                 # ~3 minutes on 2 cores
    python benchmarks/bench_parquet.py --rows 50000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_prepare import TreeMemoryPoller

RESULT = "BENCH-RESULT "
FILES = 4
GROUP_ROWS = 5000
BATCH = 256


def ensure_data(root: Path, rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = root / f"rows{rows}"
    if (folder / "done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    per_file = rows // FILES
    for f in range(FILES):
        ids = range(f * per_file, (f + 1) * per_file)
        table = pa.table({"text": [f"row {i} " + "lorem ipsum " * 40 for i in ids], "n": list(ids)})
        pq.write_table(
            table, folder / f"train-{f:05d}-of-{FILES:05d}.parquet", row_group_size=GROUP_ROWS
        )
    (folder / "done").write_text("")
    return folder


def cpu_seconds() -> float:
    """CPU time of this process and its children that ended."""
    own, ended = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def run(tool: str, workers: int, folder: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import torch

    import stoker
    from stoker import get_loader  # noqa: F401  # (loads stoker.api, imported lazily)

    start, cpu = time.perf_counter(), cpu_seconds()  # after the imports (seconds when loaded)
    rows, first = 0, None
    if tool == "bare":
        for path in sorted(folder.glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=GROUP_ROWS):
                for row in batch.to_pylist():
                    rows += row["n"] >= 0
                first = first or time.perf_counter()
    else:
        if tool == "stoker":
            loader: Any = stoker.get_loader(
                stoker.get_train_dataset(
                    str(folder), batch_size=BATCH, shuffle_buffer_size=1000,
                    max_samples_per_sequence=100, repeat=False,
                    worker_config=stoker.WorkerConfig(rank=0, world_size=1, num_workers=workers),
                )
            )  # fmt: skip
        else:
            import datasets

            files = [str(p) for p in sorted(folder.glob("*.parquet"))]
            table = datasets.Dataset.from_parquet(files)
            start, cpu = time.perf_counter(), cpu_seconds()  # the Arrow cache is built
            loader = torch.utils.data.DataLoader(
                table, batch_size=BATCH, shuffle=True, num_workers=workers
            )
        for batch in loader:
            rows += len(batch["n"])
            first = first or time.perf_counter()
    end = time.perf_counter()
    first = first or end
    return {
        "rows_s": rows / (end - start),
        "first_s": first - start,
        "steady_s": rows / max(end - first, 1e-9),
        "cpu_us": (cpu_seconds() - cpu) / max(rows, 1) * 1e6,
        "rows": int(rows),
    }


def in_subprocess(spec: dict[str, Any]) -> dict[str, Any] | None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    with TreeMemoryPoller(proc.pid, 0.1) as poller:
        out, err = proc.communicate(timeout=1800)
    line = [x for x in out.decode().splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not line:
        print(f"{spec} failed:\n{err.decode()[-2000:]}", file=sys.stderr)
        return None
    return {**json.loads(line[0][len(RESULT) :]), "peak_mib": poller.peak_bytes / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("/tmp/stoker-bench-parquet"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(RESULT + json.dumps(run(spec["tool"], spec["workers"], Path(spec["folder"]))))
        return
    folder = ensure_data(args.data, args.rows)
    configs = [("bare", 0), ("stoker", 0), ("stoker", 2), ("datasets", 0), ("datasets", 2)]
    results: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for _ in range(args.repeats):
        for tool, workers in configs:  # alternating, so load on the machine hits all alike
            got = in_subprocess({"tool": tool, "workers": workers, "folder": str(folder)})
            if got is not None:
                results[(tool, workers)].append(got)
    median = {
        key: {m: statistics.median(r[m] for r in runs) for m in runs[0]}
        for key, runs in results.items()
        if runs
    }
    print(
        f"{args.rows:,} rows, {FILES} files, row groups of {GROUP_ROWS}; medians of {args.repeats}"
    )
    print(
        f"{'tool':<10} {'W':>2} {'rows/s':>10} {'first s':>8} {'steady/s':>10} "
        f"{'CPU us/row':>11} {'peak MiB':>9}"
    )
    for (tool, workers), m in median.items():
        print(
            f"{tool:<10} {workers:>2} {m['rows_s']:>10,.0f} {m['first_s']:>8.2f} "
            f"{m['steady_s']:>10,.0f} {m['cpu_us']:>11.1f} {m['peak_mib']:>9.0f}"
        )
    bare = median.get(("bare", 0))
    for workers in (0, 2):
        ours, peer = median.get(("stoker", workers)), median.get(("datasets", workers))
        if ours is None or peer is None or bare is None:
            continue
        print(
            f"W={workers}: stoker / bare pyarrow {ours['rows_s'] / bare['rows_s']:.2f}x "
            f"(steady {ours['steady_s'] / bare['steady_s']:.2f}x), stoker / datasets "
            f"{ours['rows_s'] / peer['rows_s']:.2f}x (steady "
            f"{ours['steady_s'] / peer['steady_s']:.2f}x)"
        )


if __name__ == "__main__":
    main()
