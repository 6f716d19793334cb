"""Benchmark ``stoker prepare`` against ``energon prepare``, end to end, on the same data.

Two datasets are generated once and cached under ``--data-dir``:

* images: 20 shards x 1000 samples of a ~50 KB JPEG and a caption (~1 GB);
* tiny:   10^4 shards x 1000 samples of one ~20-byte text member (10^7 samples);
* jsonl (``--only jsonl``): one JSONL file of 10^7 short lines (328 MB; quick: 10^5), which
  both tools index (``.jsonl.idx``); the indexes must be equal.

Each CLI runs in a fresh subprocess (start-up included), alternating stoker and energon, after
removing ``.nv-meta`` and ``*.tar.idx``. Reported per tool: wall time, throughput (shard bytes /
wall time), samples/s and the peak memory of the whole process tree. The shards sit in the page
cache (they were just written or read), so the figures are warm-cache figures.

Usage::

    python benchmarks/bench_prepare.py --quick       # < 1 minute, small datasets
    python benchmarks/bench_prepare.py               # full run (several minutes per tiny run)
    python benchmarks/bench_prepare.py --only jsonl  # a JSONL file (Energon: ~3 min a run)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import Dataset, DatasetSpec, ensure_dataset
from mem_jsonl import ensure_file

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
POLL_SECONDS = 0.02

FULL = {"images": DatasetSpec("images", 20, 1000), "tiny": DatasetSpec("tiny", 10_000, 1000)}
QUICK = {"images": DatasetSpec("images", 4, 250), "tiny": DatasetSpec("tiny", 50, 1000)}
JSONL_LINES = {"full": 10**7, "quick": 10**5}


# --- measuring one command -----------------------------------------------------------------------


@dataclass
class Run:
    seconds: float
    peak_mb: float


class TreeMemoryPoller:
    """Peak memory of a process and all its descendants, polled every ``interval`` s (20 ms).

    A prepare forks worker processes, so the memory that matters is the sum over the live tree
    at each instant, not the largest single process (which is all ``ru_maxrss`` of
    ``RUSAGE_CHILDREN`` can tell). Summing RSS would count the pages that forked workers share
    with their parent (libraries, copy-on-write heap) once per process; PSS (proportional set
    size, from /proc/<pid>/smaps_rollup) divides each shared page among its sharers, so the sum of
    PSS over the tree is the memory the tree really occupies. Falls back to RSS where PSS cannot
    be read. A peak shorter than the poll interval can be missed. Polling costs CPU: the kernel
    walks the page tables to compute PSS, ~20 ms per read for a process of 400 MB.
    """

    def __init__(self, pid: int, interval: float = POLL_SECONDS) -> None:
        import psutil

        self._psutil = psutil
        self._root = psutil.Process(pid)
        self.peak_bytes = 0
        #: Each process's share of the peak (the root's first, then its descendants').
        self.peak_parts: list[int] = []
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeMemoryPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            parts = self._sample()
            if sum(parts) > self.peak_bytes:
                self.peak_bytes, self.peak_parts = sum(parts), parts
            self._stop.wait(self.interval)

    def _sample(self) -> list[int]:
        """PSS (else RSS) of each live process of the tree, the root first."""
        psutil = self._psutil
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return []
        parts = []
        for proc in procs:
            try:
                try:
                    parts.append(proc.memory_full_info().pss)
                except (psutil.AccessDenied, AttributeError):
                    parts.append(proc.memory_info().rss)
            except psutil.Error:
                continue  # exited between listing and reading
        return parts


def measure(cmd: list[str], cwd: Path | None = None) -> Run:
    """Run ``cmd``, return its wall time and the peak memory of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=_quiet_env()
    )
    with TreeMemoryPoller(proc.pid) as poller:
        out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}\n{out.decode()[-2000:]}\n"
            f"{err.decode()[-4000:]}"
        )
    return Run(seconds, poller.peak_bytes / 2**20)


def _quiet_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    return env


# --- the two tools -------------------------------------------------------------------------------


def stoker_cmd(path: Path, workers: int | None) -> list[str]:
    cmd = [str(BIN / "stoker"), "prepare", str(path), "--non-interactive", "--split-ratio"]
    cmd += ["8,1,1", "--force-overwrite", "--no-progress"]
    return cmd + (["--num-workers", str(workers)] if workers else [])


def energon_cmd(path: Path, workers: int | None) -> list[str]:
    cmd = [str(BIN / "energon"), "prepare", str(path), "--non-interactive", "--split-ratio"]
    cmd += ["8,1,1", "--force-overwrite", "--no-progress", "--skip-dataset-yaml"]
    return cmd + (["--num-workers", str(workers)] if workers else [])


def energon_available() -> bool:
    return (BIN / "energon").exists()


def clean(path: Path) -> None:
    """Remove what a prepare wrote: ``.nv-meta`` and every ``*.tar.idx``."""
    shutil.rmtree(path / ".nv-meta", ignore_errors=True)
    for idx in path.glob("*.tar.idx"):
        idx.unlink()


def check_prepared(dataset: Dataset) -> None:
    """A benchmark of a prepare that did nothing would be fast: check what it wrote."""
    info = json.loads((dataset.path / ".nv-meta" / ".info.json").read_text())
    total = sum(info["shard_counts"].values())
    if total != dataset.spec.samples:
        raise RuntimeError(
            f"{dataset.path}: .info.json counts {total} samples, expected {dataset.spec.samples}"
        )
    if len(list(dataset.path.glob("*.tar.idx"))) != dataset.spec.shards:
        raise RuntimeError(f"{dataset.path}: not every shard got a .tar.idx")


# --- reporting -----------------------------------------------------------------------------------


@dataclass
class Result:
    dataset: str
    tool: str
    shard_bytes: int
    samples: int
    runs: list[Run] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def peak_mb(self) -> float:
        return max(r.peak_mb for r in self.runs)

    @property
    def gb_per_s(self) -> float:
        return self.shard_bytes / 1e9 / self.seconds

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds


def print_table(results: list[Result]) -> None:
    header = (
        f"{'dataset':<22} {'tool':<8} {'runs':>4} {'median s':>9} {'GB/s':>7} "
        f"{'samples/s':>11} {'peak MB':>8} {'energon/stoker time':>20}"
    )
    print(header)
    print("-" * len(header))
    by_key = {(r.dataset, r.tool): r for r in results}
    for r in results:
        ratio = ""
        stoker = by_key.get((r.dataset, "stoker"))
        if r.tool == "energon" and stoker is not None:
            ratio = f"{r.seconds / stoker.seconds:.2f}x"
        print(
            f"{r.dataset:<22} {r.tool:<8} {len(r.runs):>4} {r.seconds:>9.2f} {r.gb_per_s:>7.3f} "
            f"{r.samples_per_s:>11,.0f} {r.peak_mb:>8.0f} {ratio:>20}"
        )


def startup_times(repeats: int, with_energon: bool) -> dict[str, float]:
    """Median wall time of ``<tool> --help`` (interpreter start and CLI import)."""
    tools = {"stoker": [str(BIN / "stoker"), "--help"]}
    if with_energon:
        tools["energon"] = [str(BIN / "energon"), "--help"]
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(repeats):
        for name, cmd in tools.items():
            times[name].append(measure(cmd).seconds)
    return {name: statistics.median(t) for name, t in times.items()}


# --- main ----------------------------------------------------------------------------------------


def bench_dataset(
    dataset: Dataset, repeats: int, with_energon: bool, workers: int | None
) -> list[Result]:
    tools = {"stoker": stoker_cmd}
    if with_energon:
        tools["energon"] = energon_cmd
    results = {
        name: Result(dataset.spec.name, name, dataset.shard_bytes, dataset.spec.samples)
        for name in tools
    }
    for repeat in range(repeats):
        for name, make_cmd in tools.items():  # alternate, so drifts hit both alike
            clean(dataset.path)
            run = measure(make_cmd(dataset.path, workers))
            check_prepared(dataset)
            results[name].runs.append(run)
            print(
                f"  {dataset.spec.name} {name} run {repeat + 1}/{repeats}: {run.seconds:.2f} s, "
                f"peak {run.peak_mb:.0f} MB",
                flush=True,
            )
    clean(dataset.path)
    return list(results.values())


def bench_jsonl(path: Path, repeats: int, with_energon: bool) -> list[Result]:
    """``prepare`` of one JSONL file by each tool, alternating; their indexes must be equal."""
    lines = len(np.fromfile(f"{path}.idx", dtype="<u8")) - 1
    commands = {"stoker": [str(BIN / "stoker"), "prepare", str(path), "--no-progress"]}
    if with_energon:
        commands["energon"] = [str(BIN / "energon"), "prepare", str(path)]
    results = {name: Result("jsonl", name, path.stat().st_size, lines) for name in commands}
    made: dict[str, bytes] = {}
    for repeat in range(repeats):
        for name, cmd in commands.items():
            Path(f"{path}.idx").unlink()
            run = measure(cmd)
            made[name] = Path(f"{path}.idx").read_bytes()
            results[name].runs.append(run)
            print(
                f"  jsonl {name} run {repeat + 1}/{repeats}: {run.seconds:.2f} s, "
                f"peak {run.peak_mb:.0f} MB",
                flush=True,
            )
    if len(set(made.values())) != 1:
        raise RuntimeError(f"{path}: the tools wrote different indexes")
    return list(results.values())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--quick", action="store_true", help="small datasets, one run each")
    parser.add_argument("--repeats-images", type=int, default=None, help="default 3 (quick: 1)")
    parser.add_argument("--repeats-tiny", type=int, default=1)
    parser.add_argument("--repeats-jsonl", type=int, default=1)
    parser.add_argument(
        "--tiny-shards", type=int, default=None, help="shards of the tiny dataset (full: 10^4)"
    )
    parser.add_argument(
        "--only", choices=[*sorted(FULL), "jsonl"], help="run one dataset only (jsonl: only so)"
    )
    parser.add_argument(
        "--num-workers",
        type=int,
        default=None,
        help="pass --num-workers to both CLIs (default: each tool's default; "
        "energon's is 16, stoker's min(16, cores))",
    )
    parser.add_argument("--skip-energon", action="store_true", help="benchmark stoker only")
    parser.add_argument(
        "--skip-energon-large",
        action="store_true",
        help="do not run energon on the tiny (10^7 samples) dataset",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (BIN / "stoker").exists():
        print(f"the stoker CLI is not installed next to {sys.executable}", file=sys.stderr)
        return 2
    with_energon = energon_available() and not args.skip_energon
    if not with_energon and not args.skip_energon:
        print("energon is not installed: benchmarking stoker only", flush=True)
    specs = dict(QUICK if args.quick else FULL)
    if args.tiny_shards:
        specs["tiny"] = DatasetSpec("tiny", args.tiny_shards, specs["tiny"].per_shard)
    repeats = {
        "images": args.repeats_images or (1 if args.quick else 3),
        "tiny": args.repeats_tiny,
    }
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, data in {args.data_dir}")
    results: list[Result] = []
    for kind, spec in specs.items():
        if args.only and kind != args.only:
            continue
        dataset = ensure_dataset(args.data_dir, spec)
        print(
            f"{spec.name}: {spec.samples:,} samples, {dataset.shard_bytes / 1e9:.3f} GB in "
            f"{spec.shards:,} shards",
            flush=True,
        )
        energon_here = with_energon and not (kind == "tiny" and args.skip_energon_large)
        results += bench_dataset(dataset, repeats[kind], energon_here, args.num_workers)
    if args.only == "jsonl":
        path = ensure_file(args.data_dir, JSONL_LINES["quick" if args.quick else "full"])
        print(f"{path.name}: {path.stat().st_size / 1e9:.3f} GB", flush=True)
        results += bench_jsonl(path, args.repeats_jsonl, with_energon)
    startup = startup_times(2 if args.quick else 5, with_energon)

    print()
    print_table(results)
    print()
    line = ", ".join(f"{name} --help: {seconds * 1000:.0f} ms" for name, seconds in startup.items())
    print(f"start-up (median wall time): {line}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "results": [
                        {**asdict(r), "median_s": r.seconds, "gb_per_s": r.gb_per_s}
                        for r in results
                    ],
                    "startup_s": startup,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
