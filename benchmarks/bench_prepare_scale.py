"""Prepare at scale: N tiny samples (10^6 .. 10^8), phase by phase, with peak PSS per process.

The dataset: N samples of one member each in shards of ``--per-shard`` (default 1000). With
``--data-bytes 0`` (the default) a member is a tar header alone: 512 B/sample on disk (10^8
samples: 51 GB); ``--data-bytes 8`` adds one data block (1 KB/sample). Shards are written by
numpy in worker processes (seconds per 10^7 samples).

Phases of a single-process-tree prepare (``--workers`` processes):

* ``scan``: every shard's headers read, its result and the index rows of its chunk written to the
  work folder (:mod:`stoker.format.index_chunks`): what the ranks of ``--distributed`` share;
* ``merge``: on one process (rank 0 of a distributed prepare): the chunk files' rows copied into
  ``index.sqlite``, the ``.tar.idx`` files written, then the indexes built once;
* ``publish``: the meta files written and renamed into place.

Printed per phase: seconds, samples/s, CPU seconds; peak PSS of the main process and of the
largest other process (sampled every 0.2 s from ``/proc/*/smaps_rollup``); the index size; and an
extrapolation to 10^9 samples on 64 cores of 8 machines. ``--ranks N`` then runs the same prepare
as N gloo ranks on this machine (``torch.multiprocessing``, ``--workers`` processes each, default
1) and prints the split (scan) and merge times next to the single-process ones.

Run: ``python benchmarks/bench_prepare_scale.py --samples 1e6 --workers 2 [--ranks 2]`` (or
``--quick``: 10^5 samples, 2 workers, 2 ranks, under a minute);
``--root DIR`` keeps the data there (``--reuse`` skips writing it when it is there).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

from stoker.format.index_chunks import ChunkBuilder, plan_chunks
from stoker.format.parallel import ordered_map
from stoker.format.prepare import find_shards, index_shards
from stoker.format.prepare_work import PrepareWork
from stoker.storage import open_store

BLOCK = 512


# --- data --------------------------------------------------------------------------------------


def _header_template() -> np.ndarray:
    head = bytearray(BLOCK)
    for offset, value in (
        (100, b"0000644\0"),
        (108, b"0000000\0"),
        (116, b"0000000\0"),
        (136, b"00000000000\0"),
        (156, b"0"),
        (257, b"ustar\0"),
        (263, b"00"),
    ):
        head[offset : offset + len(value)] = value
    return np.frombuffer(bytes(head), dtype=np.uint8)


def write_shard(args: tuple[str, int, int, int, bool, int]) -> None:
    """One shard of ``n`` samples: a header per member (and ``data_bytes`` of data)."""
    root, shard, n, data_bytes, random_keys, _ = args
    if random_keys:
        keys = [
            hashlib.blake2b(b"%d/%d" % (shard, i), digest_size=12).hexdigest() for i in range(n)
        ]
    else:
        keys = [f"s{shard:08d}_{i:05d}" for i in range(n)]
    names = np.frombuffer("".join(f"{k}.txt" for k in keys).encode(), dtype=np.uint8)
    names = names.reshape(n, -1)
    blocks = 1 + (1 if data_bytes else 0)
    out = np.zeros((n, blocks * BLOCK), dtype=np.uint8)
    out[:, :BLOCK] = _header_template()
    out[:, : names.shape[1]] = names
    size = b"%011o\0" % data_bytes
    out[:, 124:136] = np.frombuffer(size, dtype=np.uint8)
    out[:, 148:156] = ord(" ")
    checksum = out[:, :BLOCK].sum(axis=1, dtype=np.int64)
    for digit in range(6):  # six octal digits, NUL, space
        out[:, 148 + digit] = 48 + (checksum >> (3 * (5 - digit))) % 8
    out[:, 154] = 0
    out[:, 155] = ord(" ")
    if data_bytes:
        out[:, BLOCK : BLOCK + data_bytes] = ord("x")
    with open(os.path.join(root, f"shard_{shard:07d}.tar"), "wb") as f:
        f.write(out.tobytes() + b"\0" * 1024)


def make_shards(
    root: str, samples: int, per_shard: int, data_bytes: int, random_keys: bool, workers: int
) -> int:
    os.makedirs(root, exist_ok=True)
    shards = math.ceil(samples / per_shard)
    tasks = [
        (root, s, min(per_shard, samples - s * per_shard), data_bytes, random_keys, 0)
        for s in range(shards)
    ]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        for _ in pool.imap_unordered(write_shard, tasks, chunksize=16):
            pass
    return shards


# --- measuring ---------------------------------------------------------------------------------


class PssSampler:
    """Peak PSS (MB) of this process and of each of its descendants, sampled every 0.2 s."""

    def __init__(self) -> None:
        self.peak: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(0.2):
            for pid in [me, *_descendants(me)]:
                pss = _pss_mb(pid)
                if pss is not None:
                    self.peak[pid] = max(self.peak.get(pid, 0.0), pss)

    def main_and_largest_other(self) -> tuple[float, float]:
        me = os.getpid()
        others = [v for pid, v in self.peak.items() if pid != me]
        return self.peak.get(me, 0.0), max(others, default=0.0)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _pss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# --- single process tree -----------------------------------------------------------------------


def single(root: str, workers: int | None) -> dict[str, Any]:
    store = open_store(root)
    names = find_shards(store)
    chunks = plan_chunks(names)
    out: dict[str, Any] = {}
    c0, t0 = cpu_seconds(), time.perf_counter()
    builder = ChunkBuilder(PrepareWork(store))
    for _ in ordered_map(builder, chunks, workers, len(chunks)):
        pass  # what every rank of a distributed prepare does for its chunks
    c1, t1 = cpu_seconds(), time.perf_counter()
    print(f"scan done in {t1 - t0:.1f} s", flush=True)
    pending = index_shards(root, num_workers=workers)  # finds every chunk built: merges
    c2, t2 = cpu_seconds(), time.perf_counter()
    print(f"merge done in {t2 - t1:.1f} s: {pending.timings}", flush=True)
    with pending:
        report = pending.publish(split_ratio=[("train", 1.0)])
    c3, t3 = cpu_seconds(), time.perf_counter()
    if report.resumed_shards != report.shards:
        raise SystemExit(f"only {report.resumed_shards} of {report.shards} shards were resumed")
    out.update(scan=(t1 - t0, c1 - c0), merge=(t2 - t1, c2 - c1), publish=(t3 - t2, c3 - c2))
    out["timings"] = dict(pending.timings)
    out["index_bytes"] = os.path.getsize(os.path.join(root, ".nv-meta", "index.sqlite"))
    return out


def clean(root: str) -> None:
    shutil.rmtree(os.path.join(root, ".nv-meta"), ignore_errors=True)
    for name in os.listdir(root):
        if name.endswith(".tar.idx"):
            os.remove(os.path.join(root, name))


# --- N gloo ranks ------------------------------------------------------------------------------


def _rank(rank: int, size: int, root: str, port: int, workers: int | None, out: str) -> None:
    import torch.distributed as dist

    from stoker.format.distributed import World, on_main_rank
    from stoker.format.prepare import prepare_dataset
    from stoker.format.prepare_distributed import scan_distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    t0 = time.perf_counter()
    dist.init_process_group("gloo", rank=rank, world_size=size)
    world = World(rank, size)
    t1 = time.perf_counter()
    scan_distributed(root, world, num_workers=workers)
    t2 = time.perf_counter()
    on_main_rank(world, lambda: prepare_dataset(root, split_ratio="1,0,0", num_workers=workers))
    t3 = time.perf_counter()
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"init": t1 - t0, "scan": t2 - t1, "merge": t3 - t2}, f)
    dist.destroy_process_group()


def distributed(root: str, ranks: int, workers: int | None) -> dict[str, float]:
    import torch.multiprocessing as mp

    out = os.path.join(os.path.dirname(root), "rank0.json")
    port = 29000 + os.getpid() % 1000
    mp.spawn(_rank, args=(ranks, root, port, workers, out), nprocs=ranks)
    with open(out) as f:
        result: dict[str, float] = json.load(f)
    return result


# --- report ------------------------------------------------------------------------------------


def report(samples: int, result: dict[str, Any], cores: int, pss: tuple[float, float]) -> None:
    print(f"{'phase':34s} {'wall s':>8s} {'samples/s':>12s} {'CPU s':>8s}")
    for phase, where in (
        ("scan", f"{cores} worker processes"),
        ("merge", "main process (+ SQLite sort threads)"),
        ("publish", "main process"),
    ):
        wall, cpu = result[phase]
        print(f"{phase + ' (' + where + ')':34s} {wall:8.1f} {samples / wall:12,.0f} {cpu:8.1f}")
    t = result["timings"]
    print(
        "  merge steps: rows copied {rows:.1f} s, .tar.idx + summaries {shards:.1f} s, "
        "indexes built {indexes:.1f} s, waiting for chunks {wait:.1f} s".format(**t)
    )
    size = result["index_bytes"]
    print(f"index.sqlite {size / 2**20:,.0f} MB ({size / samples:.0f} B/sample)")
    print(f"peak PSS: main process {pss[0]:,.0f} MB, largest other process {pss[1]:,.0f} MB")
    extrapolate(samples, result, cores)


def extrapolate(samples: int, result: dict[str, Any], cores: int) -> None:
    """10^9 samples: the scan spreads over cores (linear); the merge runs on one process: rows,
    shards and publish grow linearly, the index sorts as n log n."""
    scale = 1e9 / samples
    per_core = result["scan"][0] * cores / samples  # core-seconds per sample
    t = result["timings"]
    log_factor = math.log(1e9) / math.log(samples)
    linear = (t["rows"] + t["shards"] + result["publish"][0]) * scale
    index = t["indexes"] * scale * log_factor
    merge = linear + index
    for label, n_cores in (
        (f"this machine ({cores} cores)", cores),
        ("64 cores of 8 machines", 64),
    ):
        scan = per_core * 1e9 / n_cores
        print(
            f"10^9 samples on {label}: scan {scan / 3600:.2f} h + merge on rank 0 "
            f"{merge / 3600:.2f} h = {(scan + merge) / 3600:.2f} h"
        )
    print(
        f"  (scan: {per_core * 1e6:.1f} core-us/sample measured; merge: rows + .tar.idx + "
        f"publish x{scale:.0f} = {linear / 60:.0f} min, index x{scale:.0f} x log ratio "
        f"{log_factor:.2f} = {index / 60:.0f} min)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=float, default=1e6)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--data-bytes", type=int, default=0, help="bytes per member (0: header)")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--ranks", type=int, default=0, help="also run as N gloo ranks")
    parser.add_argument("--rank-workers", type=int, default=1)
    parser.add_argument("--random-keys", action="store_true", help="hex digests as keys")
    parser.add_argument("--root", help="where the data goes (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="keep shards found in --root")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="10^5 samples, 2 workers, 2 ranks")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.workers, args.ranks = 1e5, args.workers or 2, args.ranks or 2
    samples = int(args.samples)
    cores = args.workers or os.cpu_count() or 1
    tmp = None if args.root else tempfile.mkdtemp(prefix="bench-prepare-")
    root = args.root or os.path.join(tmp or "", "ds")
    try:
        t = time.perf_counter()
        if not (args.reuse and os.path.isdir(root) and os.listdir(root)):
            shards = make_shards(
                root, samples, args.per_shard, args.data_bytes, args.random_keys, cores
            )
            print(
                f"{samples:,} samples in {shards:,} shards ({args.data_bytes} B/member) written "
                f"in {time.perf_counter() - t:.1f} s",
                flush=True,
            )
        clean(root)
        with PssSampler() as sampler:
            result = single(root, args.workers)
        pss = sampler.main_and_largest_other()
        report(samples, result, cores, pss)
        figures: dict[str, Any] = {"samples": samples, "cores": cores, **result, "pss_mb": pss}
        if args.ranks:
            clean(root)
            with PssSampler() as sampler:
                ranked = distributed(root, args.ranks, args.rank_workers)
            _, rank_pss = sampler.main_and_largest_other()
            print(
                f"{args.ranks} gloo ranks x {args.rank_workers} worker(s): process group "
                f"{ranked['init']:.1f} s, scan {ranked['scan']:.1f} s "
                f"({samples / ranked['scan']:,.0f} samples/s; single tree "
                f"{result['scan'][0]:.1f} s), merge + publish on rank 0 {ranked['merge']:.1f} s "
                f"(single {result['merge'][0] + result['publish'][0]:.1f} s); peak PSS per "
                f"process {rank_pss:,.0f} MB",
                flush=True,
            )
            figures["ranks"] = {"n": args.ranks, **ranked, "pss_mb": rank_pss}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
