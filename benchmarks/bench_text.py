"""Benchmark small text samples: stoker vs Megatron-Energon vs plain WebDataset vs a bare loop.

Workloads (``_text.py``): ``jsonl`` (20 000 JSONL lines of ~500 B, batch 256) and ``tiny`` (10^5
tiny ``.txt`` samples in 10^4 shards, batch 32). Every configuration runs in a fresh subprocess,
at W = 0 and 2 dataloader workers, alternating the tools, ``--repeats`` times; the tables show
medians and the ratios of stoker to the others. Plain WebDataset has no JSONL reader, so it runs
on ``tiny`` only. The consumer only iterates (an idle consumer).

Usage::

    python benchmarks/bench_text.py                         # ~5 minutes on 2 cores
    python benchmarks/bench_text.py --workloads jsonl --tools stoker,bare --repeats 5
    python benchmarks/bench_text.py --quick --tools stoker  # one short run each: W=2 / W=0 ratios
    python benchmarks/bench_text.py --tools stoker --warmup-samples 20000  # steady state
    python benchmarks/bench_text.py --profile jsonl         # cProfile of stoker W=0 only
    # A/B against another stoker tree (e.g. `git worktree add /tmp/base <commit>`), alternating:
    python benchmarks/bench_text.py --tools base,stoker --baseline-src /tmp/base/src --workers 0

``CPU us`` is the CPU time (user + system) per sample of the loader's processes, which a busy
machine blurs less than samples/s. The last lines print the ratios the targets are stated in.
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

from _data import has_module
from _text import WORKLOADS, ensure_jsonl, ensure_tiny, open_loader, run_bare, run_loader

REPO = Path(__file__).resolve().parent.parent
RESULT = "BENCH-RESULT "
TOOLS = ("stoker", "energon", "webdataset", "bare")
#: ``--tools base``: stoker from ``--baseline-src`` (its ``src`` folder), for A/B runs.
BASE = "base"


def child_main(spec: dict[str, Any]) -> None:
    path = Path(spec["path"])
    tool, workload, workers = spec["tool"], spec["workload"], spec["workers"]
    if tool == "bare":
        result = run_bare(workload, workers, path, spec["bare_repeat"])
    else:
        result = run_loader(
            "stoker" if tool == BASE else tool, workload, workers, path, spec["batches"],
            spec.get("warmup", 0),
        )  # fmt: skip
    print(RESULT + json.dumps(result), flush=True)


def in_subprocess(spec: dict[str, Any], timeout: float, base_src: Path | None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if spec["tool"] == BASE and base_src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(base_src), env.get("PYTHONPATH", "")])
    elif spec["tool"] == "stoker":
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(cmd, capture_output=True, cwd=REPO, env=env, timeout=timeout)
    lines = [line for line in proc.stdout.decode().splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {spec} exited {proc.returncode}\n{proc.stderr.decode()[-3000:]}")
    return dict(json.loads(lines[-1][len(RESULT) :]))


def profile(path: Path, workload: str, batches: int, top: int) -> None:
    """cProfile of stoker at W=0 over ``batches`` batches (in this process)."""
    import cProfile
    import pstats

    from stoker import get_loader  # noqa: F401

    profiler = cProfile.Profile()
    loader = open_loader("stoker", workload, 0, path)
    it = iter(loader)
    next(it)
    profiler.enable()
    for _ in range(batches):
        next(it)
    profiler.disable()
    for order in ("tottime", "cumulative"):
        pstats.Stats(profiler).sort_stats(order).print_stats(top)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=60_000, help="timed samples per run")
    parser.add_argument(
        "--warmup-samples", type=int, default=0,
        help="untimed samples after the first batch (lets W>0 workers fill their prefetch "
        "queues first: the steady state a training run sees)",
    )  # fmt: skip
    parser.add_argument("--profile", choices=list(WORKLOADS), help="only profile stoker W=0")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, help="also write the runs to this JSON file")
    parser.add_argument(
        "--quick", action="store_true", help="one run of 20 000 samples per configuration"
    )
    parser.add_argument(
        "--baseline-src", type=Path, help="the src folder of the stoker that --tools base runs"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.samples = 1, 20_000
    return args


def dataset_path(workload: str, data_dir: Path) -> Path:
    return ensure_jsonl(data_dir) if workload == "jsonl" else ensure_tiny(data_dir).path


def print_table(
    workload: str, runs: dict[tuple[str, int], list[float]], cpu: dict[tuple[str, int], list[float]]
) -> None:
    """Medians; ``CPU us`` is the CPU time per sample of the loader's processes (main and
    workers; not measured for the bare loop), which a busy machine blurs less than samples/s."""
    med = {key: statistics.median(values) for key, values in runs.items()}
    print(f"\n{workload} (batch {WORKLOADS[workload]})")
    print(
        f"{'tool':<11} {'W':>2} {'runs':>4} {'samples/s':>10} {'CPU us':>7} "
        f"{'stoker / it':>12} {'/ bare':>7}"
    )
    for (tool, workers), value in med.items():
        stoker = med.get(("stoker", workers))
        bare = med.get(("bare", workers))
        ratio = f"{stoker / value:.2f}x" if stoker else "-"
        of_bare = f"{value / bare:.2f}" if bare else "-"
        count = len(runs[(tool, workers)])
        cpu_us = statistics.median(cpu[(tool, workers)])
        print(
            f"{tool:<11} {workers:>2} {count:>4} {value:>10,.0f} {cpu_us:>7.1f} "
            f"{ratio:>12} {of_bare:>7}"
        )
    targets = {"jsonl": ("bare", 0.5), "tiny": ("energon", 10.0)}
    other, target = targets[workload]
    for workers in sorted({w for _, w in med}):
        stoker = med.get(("stoker", workers))
        if stoker is None:
            continue
        for name in ("bare", "energon", BASE):
            value = med.get((name, workers))
            if value:
                goal = f" (target >= {target:g}x)" if name == other else ""
                if name == "energon" and workload == "jsonl":
                    goal = " (target >= 10x)"
                print(f"{workload} W={workers}: stoker / {name} = {stoker / value:.2f}x{goal}")
    cpu_med = {key: statistics.median(values) for key, values in cpu.items()}
    if cpu_med.get(("stoker", 0)) and cpu_med.get(("bare", 0)):  # steadier on a busy machine
        ratio = cpu_med[("bare", 0)] / cpu_med[("stoker", 0)]
        print(f"{workload} W=0: bare CPU us / stoker CPU us = {ratio:.2f}")
    if ("stoker", 0) in med and ("stoker", 2) in med:
        print(f"stoker W=2 / W=0: {med[('stoker', 2)] / med[('stoker', 0)]:.2f}x (target >= 1.7x)")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    if args.profile:
        profile(dataset_path(args.profile, args.data_dir), args.profile, 100, args.top)
        return 0
    tools = [t for t in args.tools.split(",") if t]
    if BASE in tools and args.baseline_src is None:
        print("--tools base needs --baseline-src: skipping it", flush=True)
        tools.remove(BASE)
    if "energon" in tools and not has_module("megatron.energon"):
        print("megatron-energon is not installed: skipping it", flush=True)
        tools.remove("energon")
    if "webdataset" in tools and not has_module("webdataset"):
        print("webdataset is not installed: skipping it", flush=True)
        tools.remove("webdataset")
    workers = [int(w) for w in args.workers.split(",")]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores", flush=True)
    all_runs: dict[str, dict[str, list[float]]] = {}
    for workload in args.workloads.split(","):
        path = dataset_path(workload, args.data_dir)
        batch = WORKLOADS[workload]
        runs: dict[tuple[str, int], list[float]] = {}
        cpu: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.repeats):
            for w in workers:
                for tool in tools:
                    if tool == "webdataset" and workload == "jsonl":
                        continue  # no JSONL reader in plain WebDataset
                    spec = {
                        "tool": tool, "workload": workload, "workers": w, "path": str(path),
                        "batches": max(1, args.samples // batch), "bare_repeat": 3,
                        "warmup": args.warmup_samples // batch,
                    }  # fmt: skip
                    start = time.perf_counter()
                    result = in_subprocess(spec, args.timeout, args.baseline_src)
                    runs.setdefault((tool, w), []).append(result["samples_per_s"])
                    cpu.setdefault((tool, w), []).append(result["cpu_us"])
                    print(
                        f"  {workload} {tool} W={w}: {result['samples_per_s']:,.0f} samples/s, "
                        f"{result['cpu_us']:.0f} CPU us/sample, main process "
                        f"{result['main_cpu_us_per_batch']:.0f} CPU us/batch "
                        f"({result['main_core_share']:.0%} of a core), "
                        f"first batch {result['first_batch_s']:.2f} s "
                        f"(run {time.perf_counter() - start:.1f} s)",
                        flush=True,
                    )
        print_table(workload, runs, cpu)
        all_runs[workload] = {f"{t} W={w}": v for (t, w), v in runs.items()}
        all_runs[workload + " cpu_us"] = {f"{t} W={w}": v for (t, w), v in cpu.items()}
    if args.json:
        args.json.write_text(json.dumps(all_runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
