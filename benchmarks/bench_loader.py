"""Benchmark loading: stoker vs Megatron-Energon vs plain WebDataset vs a bare decode loop.

One dataset is generated once and cached under ``--data-dir``: 20 shards x 1000 samples of a
~50 KB photo-like JPEG (256-512 px per side) and a caption, prepared with stoker's
``prepare_dataset`` as ``CaptioningSample`` (Energon reads it too).

Every configuration runs in a fresh subprocess, alternating the tools, for 0 and 2 dataloader
workers and for uint8 (``torchrgb8``) and float (``torchrgb``) images; the loaders shuffle
(buffer 100, 100 samples per shard sequence) and pad-stack batches of 32:

* ``stoker``: ``get_train_dataset`` + ``get_loader``;
* ``stoker-nostats``: the same with ``LoaderOptions(stats=False)`` (the cost of ``stats()``:
  ``--tools stoker,stoker-nostats --repeats 5`` alternates the two);
* ``energon``: the same calls from ``megatron.energon`` (7.4.1);
* ``webdataset``: ``wds.WebDataset(...).shuffle(100).decode(mode).batched(32)`` in a torch
  ``DataLoader(batch_size=None, num_workers=W)``;
* ``bare`` / ``bare-pil``: read each shard with plain Python file reads and decode every JPEG
  (simplejpeg, as stoker does / Pillow, as Energon and WebDataset do) into a CHW tensor, in one
  process or in W processes over disjoint shards; no shuffle, no batching: the physical limit.

Measured per configuration: samples/s over ``--batches`` batches after the first, the CPU time
of the process tree (user + system, workers included) per sample over the same batches (the
figure to trust on a loaded machine), the time to the first batch (from constructing the
dataset, worker start-up included; imports excluded) and the peak memory of the whole process
tree: the sum of PSS over the live processes, polled (a page shared by forked workers or mapped
by a worker and the main process counts once; the same measure for every tool).
Then stoker (W=0, uint8) runs under cProfile.

Usage::

    python benchmarks/bench_loader.py --quick        # < 2 minutes
    python benchmarks/bench_loader.py                # full run (~15 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bare import BARE, run_bare
from _data import DatasetSpec, ensure_dataset, has_module, prepare_captioning
from _loaders import BASELINE, BATCH, LOADERS, MODES, Config, profile_stoker, run_loader
from bench_prepare import TreeMemoryPoller, _quiet_env

REPO = Path(__file__).resolve().parent.parent
RESULT = "BENCH-RESULT "
FULL = DatasetSpec("photos", 20, 1000)
QUICK = DatasetSpec("photos", 4, 250)


# --- child side: one configuration in its own process --------------------------------------------


def child_main(spec: dict[str, Any]) -> None:
    path = Path(spec["path"])
    if spec.get("profile"):
        result = profile_stoker(path, spec["batches"], spec["top"])
    else:
        config = Config(**spec["config"])
        run = run_bare if config.tool in BARE else run_loader
        result = run(config, path, spec["batches"])
    print(RESULT + json.dumps(result), flush=True)


# --- parent side ---------------------------------------------------------------------------------


@dataclass
class Run:
    samples_per_s: float
    first_batch_s: float
    peak_mb: float
    wall_s: float
    cpu_ms_per_sample: float = 0.0
    #: The peak's PSS per process, MB: the main process first, then the workers.
    peak_parts_mb: tuple[float, ...] = ()
    #: The main (training) process's part of ``cpu_ms_per_sample``; None where not measured
    #: (the bare loop's processes report their own CPU only).
    main_cpu_ms_per_sample: float | None = None


def in_subprocess(
    spec: dict[str, Any], poll: float, timeout: float, src: Path | None = None
) -> tuple[dict[str, Any], Run]:
    """Run one child (stoker from ``src`` where given); its result and the peak memory of its
    process tree."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = _quiet_env()
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src.resolve()), env.get("PYTHONPATH", "")])
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    with TreeMemoryPoller(proc.pid, poll) as poller:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    wall = time.perf_counter() - start
    lines = [line for line in out.decode().splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {spec} exited {proc.returncode}\n{out.decode()[-2000:]}\n{err.decode()[-4000:]}"
        )
    result = json.loads(lines[-1][len(RESULT) :])
    peak = poller.peak_bytes / 2**20
    return result, Run(
        result.get("samples_per_s", 0.0),
        result.get("first_batch_s", 0.0),
        peak,
        wall,
        result.get("cpu_ms_per_sample", 0.0),
        tuple(part / 2**20 for part in poller.peak_parts),
        result.get("main_cpu_ms_per_sample"),
    )


def schedule(
    tools: list[str], dtypes: list[str], repeats: int, workers: tuple[int, ...] = (0, 2)
) -> list[Config]:
    """Every configuration once, then the W=2 runs of stoker, stoker-base, energon and bare
    again, alternating."""
    first = [Config(tool, w, dtype) for dtype in dtypes for w in workers for tool in tools]
    pair = [t for t in ("stoker", "stoker-nostats", BASELINE, "energon", "bare") if t in tools]
    again = [Config(tool, 2, dtype) for dtype in dtypes for tool in pair]
    return first + again * (repeats - 1)


def median(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def print_tables(results: dict[Config, list[Run]]) -> None:
    header = (
        f"{'configuration':<24} {'runs':>4} {'samples/s':>10} {'first batch s':>14} "
        f"{'peak MB':>8} {'wall s':>7} {'CPU ms/sample':>14}"
    )
    print(header)
    print("-" * len(header))
    for config, runs in results.items():
        print(
            f"{config.label:<24} {len(runs):>4} {median(runs, 'samples_per_s'):>10,.0f} "
            f"{median(runs, 'first_batch_s'):>14.2f} {median(runs, 'peak_mb'):>8.0f} "
            f"{median(runs, 'wall_s'):>7.1f} {median(runs, 'cpu_ms_per_sample'):>14.2f}"
        )
    others = ("stoker-nostats", BASELINE, "energon", "webdataset", "bare", "bare-pil")
    # CPU per sample is the figure that survives a loaded machine: "CPU ms" rows give
    # other/stoker, so that > 1 means stoker is cheaper, like the samples/s rows.
    for attr, what in (
        ("samples_per_s", "samples/s"),
        ("cpu_ms_per_sample", "CPU, other/"),
        ("peak_mb", "peak MB"),
    ):
        print()
        header = f"{'stoker ' + what:<18}" + "".join(f"{'stoker/' + o:>20}" for o in others)
        print(header)
        print("-" * len(header))
        for dtype in MODES:
            for workers in sorted({c.workers for c in results}):
                stoker = results.get(Config("stoker", workers, dtype))
                if stoker is None:
                    continue
                cells = []
                for other in others:
                    runs = results.get(Config(other, workers, dtype))
                    if runs is None:
                        cells.append(f"{'-':>20}")
                        continue
                    mine, theirs = median(stoker, attr), median(runs, attr)
                    if attr == "cpu_ms_per_sample":
                        mine, theirs = theirs, mine or float("nan")
                    cells.append(f"{mine / theirs:>19.2f}x")
                print(f"{f'W={workers} {dtype}':<18}" + "".join(cells))


#: Issue targets at W=2: (what, dtype, attribute, other tool, bound, at least).
TARGETS = (
    ("uint8 samples/s vs the libjpeg-turbo bare loop", "uint8", "samples_per_s", "bare", 0.9, True),
    ("float samples/s vs Energon", "float", "samples_per_s", "energon", 2.5, True),
    ("uint8 peak memory vs Energon", "uint8", "peak_mb", "energon", 0.5, False),
    ("float peak memory vs Energon", "float", "peak_mb", "energon", 0.5, False),
)


def print_targets(results: dict[Config, list[Run]]) -> None:
    """stoker's W=2 ratios against the targets, where both sides ran."""
    lines = []
    for what, dtype, attr, other, bound, at_least in TARGETS:
        mine, theirs = results.get(Config("stoker", 2, dtype)), results.get(Config(other, 2, dtype))
        if not mine or not theirs:
            continue
        ratio = median(mine, attr) / median(theirs, attr)
        met = ratio >= bound if at_least else ratio <= bound
        sign = ">=" if at_least else "<="
        lines.append(
            f"  {what}: {ratio:.2f}x (target {sign} {bound}x: {'met' if met else 'not met'})"
        )
    mine, bare = results.get(Config("stoker", 2, "uint8")), results.get(Config("bare", 2, "uint8"))
    if mine and bare and median(mine, "cpu_ms_per_sample"):
        ratio = median(bare, "cpu_ms_per_sample") / median(mine, "cpu_ms_per_sample")
        lines.append(
            f"  uint8 CPU per sample, bare / stoker (steadier on a loaded machine): {ratio:.2f}x"
        )
    if lines:
        print("\nW=2 targets (stoker / other, medians):")
        print("\n".join(lines))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument(
        "--quick", action="store_true", help="4 x 250 samples, 10 batches, uint8 only"
    )
    parser.add_argument("--dtypes", help="comma-separated: uint8,float (quick: uint8)")
    parser.add_argument("--batches", type=int, help="timed batches after the first (150)")
    parser.add_argument("--repeats", type=int, help="runs of the stoker/energon W=2 pairs (3)")
    parser.add_argument("--tools", default=",".join(LOADERS + BARE), help="comma-separated")
    parser.add_argument("--profile-batches", type=int, help="batches under cProfile (63)")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--top", type=int, default=15, help="functions per profile listing")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between PSS reads")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per configuration")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--workers", default="0,2", help="comma-separated worker counts (0,2)")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="also run stoker from this src/ folder (tool stoker-base): before/after, same run",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    tools = [t for t in args.tools.split(",") if t]
    if args.baseline_src is not None and BASELINE not in tools:
        tools.insert(tools.index("stoker") + 1 if "stoker" in tools else 0, BASELINE)
    unknown = sorted(set(tools) - set(LOADERS + BARE + (BASELINE,)))
    if unknown:
        print(f"unknown tools {unknown}; use some of {LOADERS + BARE}", file=sys.stderr)
        return 2
    if "energon" in tools and not has_module("megatron.energon"):
        print("megatron-energon is not installed: skipping it", flush=True)
        tools.remove("energon")
    batches = args.batches or (10 if args.quick else 150)
    repeats = args.repeats or (1 if args.quick else 3)
    profile_batches = args.profile_batches or (20 if args.quick else 63)
    dataset = ensure_dataset(args.data_dir, QUICK if args.quick else FULL)
    prepare_captioning(dataset)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {dataset.spec.name}: "
        f"{dataset.spec.samples:,} samples, {dataset.shard_bytes / 1e9:.2f} GB; "
        f"{batches} timed batches of {BATCH}",
        flush=True,
    )
    results: dict[Config, list[Run]] = {}
    dtypes = (args.dtypes or ("uint8" if args.quick else "uint8,float")).split(",")
    if not set(dtypes) <= set(MODES):
        print(f"unknown dtypes {dtypes}; use some of {list(MODES)}", file=sys.stderr)
        return 2
    workers = tuple(int(w) for w in args.workers.split(","))
    for config in schedule(tools, dtypes, repeats, workers):
        spec = {"config": asdict(config), "path": str(dataset.path), "batches": batches}
        src = args.baseline_src if config.tool == BASELINE else None
        result, run = in_subprocess(spec, args.poll, args.timeout, src)
        results.setdefault(config, []).append(run)
        main_cpu = run.main_cpu_ms_per_sample
        main_part = "" if main_cpu is None else f" (main process {main_cpu:.3f})"
        print(
            f"  {config.label:<24} {run.samples_per_s:>8,.0f} samples/s, first batch "
            f"{run.first_batch_s:.2f} s, peak {run.peak_mb:.0f} MB "
            f"({' + '.join(f'{part:.0f}' for part in run.peak_parts_mb)}), "
            f"{run.cpu_ms_per_sample:.2f} CPU ms/sample{main_part} ({result['batch']})",
            flush=True,
        )
    print()
    print_tables(results)
    print_targets(results)
    profile = None
    if not args.no_profile and "stoker" in tools:
        spec = {"profile": True, "path": str(dataset.path), "batches": profile_batches}
        profile, _ = in_subprocess({**spec, "top": args.top}, args.poll, args.timeout)
        print(f"\ncProfile of stoker W=0 uint8, {profile['batches'] * BATCH} samples:")
        for order, text in profile["stats"].items():
            print(f"\n--- top {args.top} by {order} ---")
            print(text.strip().split("\n\n", 1)[-1])
    if args.json:
        rows = [{**asdict(c), "runs": [asdict(r) for r in runs]} for c, runs in results.items()]
        args.json.write_text(json.dumps({"results": rows, "profile": profile}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
