"""Thread workers against fork workers: samples/s and the process tree's peak memory.

Three workloads, each loaded by 2 workers of each type (``get_loader(worker_type=...)``):
JPEG photos decoded to uint8 and to float CHW tensors (batches of 32; the decoders release the
GIL), and small JSONL text samples (batches of 256; pure Python per sample). Each run is a fresh
child process that warms up, then loads for ``--seconds``; the parent samples the child's
process tree meanwhile and keeps the peaks of PSS (a shared page divided among its sharers),
USS (pages only one process maps) and the tree's distinct pages, a shared page counted once
(``/proc/PID/pagemap``, which needs root; else left out). The same figures are taken once before
the loader starts (the process with torch, stoker and the dataset made): what the loader adds is
the difference, and ``base / fork`` is the lowest thread/fork ratio threads could reach. Runs
alternate between the types and repeat ``--repeat`` times; medians are printed, with
thread/fork ratios.

Usage::

    python benchmarks/bench_worker_types.py [--seconds 8] [--repeat 3] [--data-dir bench-data]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
BASE, READY, RESULT = "BASE", "READY", "RESULT "
WORKLOADS = ("uint8", "float", "text")
TYPES = ("fork", "thread")


def child_main(spec: dict[str, Any]) -> None:
    """Load ``spec``'s workload; print BASE before the loader starts (and wait for a line on
    stdin), READY after the warm-up and RESULT with samples/s."""
    loader = open_loader(spec)
    print(BASE, flush=True)
    sys.stdin.readline()  # the parent measured the process before any worker exists
    batches = iter(loader)
    for _ in range(spec["warmup"]):
        next(batches)
    print(READY, flush=True)
    samples, start = 0, time.perf_counter()
    while time.perf_counter() - start < spec["seconds"]:
        batch = next(batches)
        samples += len(batch.__key__)
    elapsed = time.perf_counter() - start
    print(RESULT + json.dumps({"samples_per_s": samples / elapsed}), flush=True)
    loader.close()


def open_loader(spec: dict[str, Any]) -> Any:
    import stoker
    from _loaders import BATCH, MAX_SAMPLES_PER_SEQUENCE, MODES, SHUFFLE_BUFFER
    from _text import WORKLOADS as TEXT_BATCH
    from _text import text_cooker

    workload = spec["workload"]
    if workload == "text":

        class Encoder(stoker.DefaultTaskEncoder):  # type: ignore[type-arg]
            cookers = [stoker.Cooker(stoker.stateless(text_cooker(stoker)))]  # noqa: RUF012

        batch = TEXT_BATCH["jsonl"]
    else:

        class Encoder(stoker.DefaultTaskEncoder):  # type: ignore[type-arg,no-redef]
            decoder = stoker.SampleDecoder(image_decode=MODES[workload])

        batch = BATCH
    dataset = stoker.get_train_dataset(
        spec["path"],
        worker_config=stoker.WorkerConfig(rank=0, world_size=1, num_workers=spec["workers"]),
        batch_size=batch,
        shuffle_buffer_size=SHUFFLE_BUFFER,
        max_samples_per_sequence=MAX_SAMPLES_PER_SEQUENCE,
        task_encoder=Encoder(),
    )
    return stoker.get_loader(dataset, worker_type=spec["worker_type"])


def tree_memory(pid: int) -> dict[str, float]:
    """PSS and USS summed over ``pid``'s tree, and its distinct pages (MB)."""
    import psutil

    root = psutil.Process(pid)
    procs = [root, *root.children(recursive=True)]
    out = {"pss_mb": 0.0, "uss_mb": 0.0}
    for proc in procs:
        info = proc.memory_full_info()
        out["pss_mb"] += info.pss / 2**20
        out["uss_mb"] += info.uss / 2**20
    try:
        from mem_pages import account

        out["distinct_mb"] = account([p.pid for p in procs])["total_mb"]
    except (OSError, ValueError):  # no pagemap access
        pass
    return out


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """One child run of ``spec``: its samples/s and the peaks of its tree's memory."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    assert proc.stdout is not None and proc.stdin is not None
    peaks: dict[str, float] = {}
    try:
        if not proc.stdout.readline().startswith(BASE):
            raise RuntimeError(f"{spec}: the child failed before its loader started")
        base = {f"base_{k}": v for k, v in tree_memory(proc.pid).items()}
        proc.stdin.write("\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line.startswith(READY):
            raise RuntimeError(f"{spec}: the child failed before its warm-up ended")
        os.set_blocking(proc.stdout.fileno(), False)
        result = None
        while result is None:
            for key, value in tree_memory(proc.pid).items():
                peaks[key] = max(peaks.get(key, 0.0), value)
            text = proc.stdout.readline()
            if text.startswith(RESULT):
                result = json.loads(text[len(RESULT) :])
            elif proc.poll() is not None:
                raise RuntimeError(f"{spec}: the child exited {proc.returncode}")
            else:
                time.sleep(0.3)
    finally:
        proc.wait(timeout=60)
    return {**result, **peaks, **base}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--json-out", type=Path, help="also write every run's figures here")
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    from _data import DatasetSpec, ensure_dataset, prepare_captioning
    from _text import ensure_jsonl

    photos = ensure_dataset(args.data_dir, DatasetSpec("photos", 8, 250))
    prepare_captioning(photos)
    paths = {"uint8": photos.path, "float": photos.path, "text": ensure_jsonl(args.data_dir)}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.repeat):  # alternating: the machine's load hits both types alike
        for workload in args.workloads.split(","):
            for worker_type in TYPES:
                spec = {"workload": workload, "worker_type": worker_type,
                        "path": str(paths[workload]), "workers": args.workers,
                        "warmup": args.warmup, "seconds": args.seconds}  # fmt: skip
                results.setdefault((workload, worker_type), []).append(run_one(spec))
    if args.json_out is not None:
        raw = {f"{w} {t}": runs for (w, t), runs in results.items()}
        args.json_out.write_text(json.dumps(raw, indent=1))
    report(results, args)
    return 0


def report(results: dict[tuple[str, str], list[dict[str, Any]]], args: argparse.Namespace) -> None:
    keys = ("samples_per_s", "pss_mb", "uss_mb", "distinct_mb")
    print(f"\n{args.workers} workers, medians of {args.repeat} runs of {args.seconds:.0f} s "
          f"(alternating; {os.cpu_count()} CPUs)")  # fmt: skip
    print(
        f"{'workload':9} {'type':7} {'samples/s':>10} {'PSS MB':>8} {'USS MB':>8} {'pages MB':>9}"
    )
    medians: dict[tuple[str, str], dict[str, float]] = {}
    for (workload, worker_type), runs in results.items():
        med = {
            k: statistics.median([r[k] for r in runs]) for k in keys if all(k in r for r in runs)
        }
        medians[(workload, worker_type)] = med
        cells = [
            f"{med.get(k, float('nan')):>{w},.0f}" for k, w in zip(keys, (10, 8, 8, 9), strict=True)
        ]
        print(f"{workload:9} {worker_type:7} {' '.join(cells)}")
    for workload in dict.fromkeys(w for w, _ in results):
        fork, thread = medians[(workload, "fork")], medians[(workload, "thread")]
        ratios = ", ".join(
            f"{k} x{thread[k] / fork[k]:.2f}" for k in keys if k in fork and k in thread
        )
        print(f"thread/fork {workload}: {ratios}")
        print_bound(workload, results[(workload, "fork")], results[(workload, "thread")])


def print_bound(workload: str, fork: list[dict[str, Any]], thread: list[dict[str, Any]]) -> None:
    """What the loader adds to the training process (distinct pages, else PSS), per type, and
    the smallest thread/fork ratio possible: threads that add nothing, ``base / fork``."""
    key = "distinct_mb" if all("distinct_mb" in r for r in fork + thread) else "pss_mb"
    base = statistics.median([r[f"base_{key}"] for r in fork + thread])
    added = {
        name: statistics.median([r[key] - r[f"base_{key}"] for r in runs])
        for name, runs in (("fork", fork), ("thread", thread))
    }
    print(
        f"  {workload}: the process before the loader {base:,.0f} MB ({key}); the loader adds "
        f"fork {added['fork']:,.0f} MB, thread {added['thread']:,.0f} MB; thread/fork cannot go "
        f"below x{base / (base + added['fork']):.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
