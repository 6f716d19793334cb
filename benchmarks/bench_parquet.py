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

Imports are not timed.

``peak MiB`` is the peak resident memory of the process plus its largest child (``ru_maxrss``).

Usage::

    python benchmarks/bench_parquet.py                 # ~3 minutes on 2 cores
    python benchmarks/bench_parquet.py --rows 50000 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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


def run(tool: str, workers: int, folder: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq
    import torch

    import stoker

    start = time.perf_counter()  # after the imports (seconds on a loaded machine)
    rows = 0
    if tool == "bare":
        for path in sorted(folder.glob("*.parquet")):
            for batch in pq.ParquetFile(path).iter_batches(batch_size=GROUP_ROWS):
                for row in batch.to_pylist():
                    rows += row["n"] >= 0
    elif tool == "stoker":
        dataset = stoker.get_train_dataset(
            str(folder),
            batch_size=BATCH,
            shuffle_buffer_size=1000,
            max_samples_per_sequence=100,
            worker_config=stoker.WorkerConfig(rank=0, world_size=1, num_workers=workers),
            repeat=False,
        )
        for batch in stoker.get_loader(dataset):
            rows += len(batch["n"])
    else:
        import datasets

        table = datasets.Dataset.from_parquet([str(p) for p in sorted(folder.glob("*.parquet"))])
        start = time.perf_counter()  # the Arrow cache is built: time the loading only
        loader = torch.utils.data.DataLoader(
            table, batch_size=BATCH, shuffle=True, num_workers=workers
        )
        for batch in loader:
            rows += len(batch["n"])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"rows": int(rows), "seconds": seconds, "peak_mib": peak / 1024}


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
            spec = json.dumps({"tool": tool, "workers": workers, "folder": str(folder)})
            out = subprocess.run(
                [sys.executable, __file__, "--child", spec], capture_output=True, text=True
            )
            line = [x for x in out.stdout.splitlines() if x.startswith(RESULT)]
            if out.returncode != 0 or not line:
                print(f"{tool} W={workers} failed:\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            results[(tool, workers)].append(json.loads(line[0][len(RESULT) :]))
    bare = statistics.median(r["rows"] / r["seconds"] for r in results[("bare", 0)])
    print(f"{args.rows} rows, {FILES} files, row groups of {GROUP_ROWS}; medians of {args.repeats}")
    print(f"{'tool':<10} {'W':>2} {'rows/s':>10} {'x bare':>7} {'peak MiB':>9}")
    for (tool, workers), runs in results.items():
        if not runs:
            continue
        rate = statistics.median(r["rows"] / r["seconds"] for r in runs)
        peak = statistics.median(r["peak_mib"] for r in runs)
        print(f"{tool:<10} {workers:>2} {rate:>10,.0f} {rate / bare:>7.2f} {peak:>9.0f}")


if __name__ == "__main__":
    main()
