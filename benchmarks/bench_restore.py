"""Benchmark saving and restoring the loader state: stoker vs Megatron-Energon 7.4.1.

The dataset is ``bench_loader.py``'s (generated once and cached under ``--data-dir``): 20 shards x
1000 samples of a ~50 KB photo-like JPEG and a caption, prepared as ``CaptioningSample``
(``--quick``: 4 x 250). Both loaders shuffle (buffer 100, 100 samples per shard sequence), decode
to uint8 tensors and batch 32, through ``get_train_dataset`` + ``get_savable_loader`` with the
default arguments otherwise (Energon: an internal worker checkpoint every 60 s).

For each tool, W (dataloader workers) in {0, 2} and T in {5, 30, 120} s (``--quick``: 2, 5, 10):

1. a fresh subprocess loads for T seconds, then measures ``save_state_rank()`` (wall time), the
   state's size (stoker: bytes of ``json.dumps``; both: bytes of ``torch.save`` into a BytesIO),
   writes the state with ``torch.save`` and notes the keys of the batch after the save;
2. another fresh subprocess (imports and ``torch.load`` of the state excluded) times the restore:
   ``get_train_dataset`` + ``get_savable_loader`` + ``restore_state_rank`` + the first batch, and
   checks that this batch is the one the saved run yielded next (``exact``).

``fresh`` is the time to the first batch without a restore (dataset, loader, first batch; step 1),
so ``restore - fresh`` is what restoring costs on top of starting.

Usage::

    python benchmarks/bench_restore.py --quick            # ~5 minutes on 2 cores
    python benchmarks/bench_restore.py                    # ~15 minutes
    python benchmarks/bench_restore.py --times 5,30 --workers 2 --tools stoker
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import DatasetSpec, ensure_dataset, has_module, prepare_captioning

REPO = Path(__file__).resolve().parent.parent
BATCH = 32
SHUFFLE_BUFFER = 100
MAX_SAMPLES_PER_SEQUENCE = 100
RESULT = "BENCH-RESULT "
FULL = DatasetSpec("photos", 20, 1000)
QUICK = DatasetSpec("photos", 4, 250)
TIMES, QUICK_TIMES = (5.0, 30.0, 120.0), (2.0, 5.0, 10.0)
TOOLS = ("stoker", "energon")


# --- child side ----------------------------------------------------------------------------------


def library(tool: str) -> Any:
    """The tool's module with its loading API imported (``import stoker`` alone is lazy)."""
    import importlib

    module = importlib.import_module("stoker" if tool == "stoker" else "megatron.energon")
    for name in ("get_train_dataset", "get_savable_loader", "SampleDecoder"):
        getattr(module, name)
    return module


def open_loader(tool: str, path: str, workers: int) -> Any:
    lib = library(tool)

    class Encoder(lib.DefaultTaskEncoder):  # type: ignore[misc, name-defined]
        decoder = lib.SampleDecoder(image_decode="torchrgb8")

    dataset = lib.get_train_dataset(
        path,
        worker_config=lib.WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH,
        shuffle_buffer_size=SHUFFLE_BUFFER,
        max_samples_per_sequence=MAX_SAMPLES_PER_SEQUENCE,
        task_encoder=Encoder(),
    )
    return lib.get_savable_loader(dataset)


def keys_of(batch: Any) -> list[str]:
    return [str(k) for k in batch.__key__]


def child_save(spec: dict[str, Any]) -> dict[str, Any]:
    """Load for ``seconds``, then time ``save_state_rank`` and measure the state."""
    import torch

    library(spec["tool"])
    start = time.perf_counter()
    loader = open_loader(spec["tool"], spec["path"], spec["workers"])
    batches = iter(loader)
    next(batches)
    fresh_s = time.perf_counter() - start
    count, start = 1, time.perf_counter()
    while time.perf_counter() - start < spec["seconds"]:
        next(batches)
        count += 1
    loaded_s = time.perf_counter() - start

    start = time.perf_counter()
    state = loader.save_state_rank()
    save_s = time.perf_counter() - start
    buffer = io.BytesIO()
    torch.save(state, buffer)
    json_bytes = len(json.dumps(state)) if spec["tool"] == "stoker" else None
    torch.save(state, spec["state_file"])
    expected = keys_of(next(batches))
    del batches
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return {
        "batches": count,
        "samples_per_s": (count - 1) * BATCH / loaded_s,
        "fresh_s": fresh_s,
        "save_s": save_s,
        "torch_bytes": len(buffer.getvalue()),
        "json_bytes": json_bytes,
        "expected": expected,
    }


def child_restore(spec: dict[str, Any]) -> dict[str, Any]:
    """New dataset + loader + ``restore_state_rank`` + first batch, timed by part."""
    import torch

    library(spec["tool"])
    start = time.perf_counter()
    state = torch.load(spec["state_file"], weights_only=spec["tool"] == "stoker")
    load_s = time.perf_counter() - start

    start = time.perf_counter()
    loader = open_loader(spec["tool"], spec["path"], spec["workers"])
    built = time.perf_counter()
    loader.restore_state_rank(state)
    restored = time.perf_counter()
    batch = next(iter(loader))
    end = time.perf_counter()
    exact = keys_of(batch) == spec["expected"]
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return {
        "load_s": load_s,
        "construct_s": built - start,
        "restore_call_s": restored - built,
        "first_batch_s": end - restored,
        "restore_s": end - start,
        "exact": exact,
    }


def child_main(spec: dict[str, Any]) -> None:
    result = child_save(spec) if spec["step"] == "save" else child_restore(spec)
    print(RESULT + json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # do not wait on Energon's daemon threads


# --- parent side ---------------------------------------------------------------------------------


def in_subprocess(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run(cmd, capture_output=True, cwd=REPO, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(
            f"child {spec['tool']} {spec['step']} timed out after {timeout} s"
        ) from e
    out = proc.stdout.decode()
    lines = [line for line in out.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"child {spec} exited {proc.returncode}\n{out[-2000:]}\n{proc.stderr.decode()[-4000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT) :])
    return result


@dataclass(frozen=True)
class Config:
    tool: str
    workers: int
    seconds: float


def run_config(config: Config, path: Path, tmp: Path) -> dict[str, Any]:
    state_file = tmp / f"{config.tool}-{config.workers}-{config.seconds:g}.pt"
    base = {"tool": config.tool, "workers": config.workers, "path": str(path)}
    saved = in_subprocess(
        {**base, "step": "save", "seconds": config.seconds, "state_file": str(state_file)},
        timeout=config.seconds + 300,
    )
    restored = in_subprocess(
        {**base, "step": "restore", "state_file": str(state_file), "expected": saved["expected"]},
        timeout=600,
    )
    del saved["expected"]
    return {**saved, **restored}


def fmt_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1024:.1f} KB" if n < 2**20 else f"{n / 2**20:.1f} MB"


def print_table(results: dict[Config, dict[str, Any]]) -> None:
    header = (
        f"{'tool':<8} {'W':>2} {'T s':>5} {'batches':>7} {'save ms':>8} {'json':>9} "
        f"{'torch.save':>10} {'fresh s':>7} {'restore s':>9} {'(build/restore/1st)':>21} "
        f"{'exact':>5}"
    )
    print("\n" + header)
    print("-" * len(header))
    for config, r in results.items():
        parts = f"{r['construct_s']:.2f}/{r['restore_call_s']:.2f}/{r['first_batch_s']:.2f}"
        print(
            f"{config.tool:<8} {config.workers:>2} {config.seconds:>5g} {r['batches']:>7} "
            f"{r['save_s'] * 1e3:>8.2f} {fmt_bytes(r['json_bytes']):>9} "
            f"{fmt_bytes(r['torch_bytes']):>10} {r['fresh_s']:>7.2f} {r['restore_s']:>9.2f} "
            f"{parts:>21} {'yes' if r['exact'] else 'NO':>5}"
        )
    pairs = [
        (c, results[c], results.get(Config("energon", c.workers, c.seconds)))
        for c in results
        if c.tool == "stoker"
    ]
    if any(e is not None for _, _, e in pairs):
        print("\nenergon / stoker:")
        print(f"{'W':>2} {'T s':>5} {'save time':>10} {'state size':>11} {'restore time':>13}")
        for config, s, e in pairs:
            if e is None:
                continue
            print(
                f"{config.workers:>2} {config.seconds:>5g} {e['save_s'] / s['save_s']:>9.1f}x "
                f"{e['torch_bytes'] / s['torch_bytes']:>10.1f}x "
                f"{e['restore_s'] / s['restore_s']:>12.2f}x"
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 x 250 samples, T = 2, 5, 10 s")
    parser.add_argument("--times", help="comma-separated load times T in seconds")
    parser.add_argument("--workers", default="0,2", help="comma-separated worker counts (0,2)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="stoker,energon")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
    times = (
        [float(t) for t in args.times.split(",")]
        if args.times
        else list(QUICK_TIMES if args.quick else TIMES)
    )
    workers = [int(w) for w in args.workers.split(",")]
    tools = [t for t in args.tools.split(",") if t]
    if "energon" in tools and not has_module("megatron.energon"):
        print("megatron-energon is not installed: skipping it", flush=True)
        tools.remove("energon")
    dataset = ensure_dataset(args.data_dir, QUICK if args.quick else FULL)
    prepare_captioning(dataset)
    print(f"dataset {dataset.spec.name}: {dataset.spec.samples} samples", flush=True)

    results: dict[Config, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-restore-") as tmp:
        for seconds in times:
            for w in workers:
                for tool in tools:
                    config = Config(tool, w, seconds)
                    print(f"{tool} W={w} T={seconds:g}s ...", flush=True)
                    results[config] = run_config(config, dataset.path, Path(tmp))
                    print(f"  {json.dumps(results[config])}", flush=True)
                    if args.json:  # after each configuration: a failure keeps the rest
                        rows = [{"tool": c.tool, "workers": c.workers, "seconds": c.seconds, **r}
                                for c, r in results.items()]  # fmt: skip
                        args.json.write_text(json.dumps(rows, indent=1))
    print_table(results)
    return 0 if all(r["exact"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
