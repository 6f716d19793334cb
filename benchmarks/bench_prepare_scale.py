"""Prepare figures: N tiny samples (one 8-byte part each) in shards of 1000, phase by phase.

Phases (single process tree): ``scan`` reads every shard's headers into the work folder (worker
processes; the part that spreads over ranks), ``merge`` builds ``index.sqlite`` and the
``.tar.idx`` files from the work folder (what rank 0 does after a distributed scan; also timed
with ``--no-sample-index``), ``publish`` writes the meta files. Prints seconds, samples/s, peak
RSS of the main process and of the largest worker, the index size, and an extrapolation to 10^9
samples on this machine and on 64 cores (8 machines). ``--random-keys``: hex digests as keys
(the worst case for the key index). ``--ranks 4`` runs the scan as 4 gloo ranks on this machine
(torch.multiprocessing) and prints the split and merge times.

Run: ``python benchmarks/bench_prepare_scale.py --samples 1e6 [--ranks 4] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import sys
import tarfile
import tempfile
import time

from stoker.format.parallel import ordered_map
from stoker.format.prepare import find_shards, index_shards, prepare_dataset
from stoker.format.prepare_work import PrepareWork
from stoker.storage import open_store

PER_SHARD = 1000


def peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 2**10


def make_shards(root: str, samples: int, random_keys: bool = False) -> int:
    """Write ``samples`` tiny samples; ``random_keys``: hex digests instead of keys in order
    (every row then lands on a random page of the key index)."""
    os.makedirs(root, exist_ok=True)
    shards = (samples + PER_SHARD - 1) // PER_SHARD
    for s in range(shards):
        n = min(PER_SHARD, samples - s * PER_SHARD)
        blocks = []
        for i in range(n):
            key = (
                hashlib.blake2b(b"%d/%d" % (s, i), digest_size=12).hexdigest()
                if random_keys
                else f"s{s:06d}_{i:04d}"
            )
            info = tarfile.TarInfo(f"{key}.txt")
            info.size = 8
            blocks.append(info.tobuf(tarfile.USTAR_FORMAT) + b"%08d" % i + b"\0" * 504)
        with open(os.path.join(root, f"shard_{s:06d}.tar"), "wb") as f:
            f.write(b"".join(blocks) + b"\0" * 1024)
    return shards


def single(root: str, workers: int | None) -> dict[str, float]:
    store = open_store(root)
    names = find_shards(store)
    t0 = time.perf_counter()
    for _ in ordered_map(PrepareWork(store).scan, names, workers, len(names)):
        pass  # every shard's result into the work folder (what each rank does)
    t1 = time.perf_counter()
    with index_shards(root, num_workers=workers, sample_index=False):
        pass  # the merge of --no-sample-index: .tar.idx files only
    t2 = time.perf_counter()
    report = prepare_dataset(root, split_ratio="1,0,0", num_workers=workers)  # all resumed
    t3 = time.perf_counter()
    assert report.resumed_shards == report.shards
    return {"scan": t1 - t0, "merge no index": t2 - t1, "merge+publish": t3 - t2}


def _rank(rank: int, size: int, root: str, port: int, workers: int | None, out: str) -> None:
    import torch.distributed as dist

    from stoker.format.distributed import World
    from stoker.format.prepare_distributed import prepare_dataset_distributed, scan_distributed

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    world = World(rank, size)
    t0 = time.perf_counter()
    scan_distributed(root, world, num_workers=workers)
    t1 = time.perf_counter()
    prepare_dataset_distributed(root, split_ratio="1,0,0", num_workers=workers, world=world)
    t2 = time.perf_counter()
    if rank == 0:
        with open(out, "w") as f:
            f.write(f"{t1 - t0} {t2 - t1} {peak_rss_mb()}")
    dist.destroy_process_group()


def distributed(root: str, ranks: int, workers: int | None) -> tuple[float, float, float]:
    import torch.multiprocessing as mp

    out = os.path.join(os.path.dirname(root), "rank0.txt")
    mp.spawn(_rank, args=(ranks, root, 29000 + os.getpid() % 1000, workers, out), nprocs=ranks)
    with open(out) as f:
        split, merge, rss = map(float, f.read().split())
    return split, merge, rss


def report(root: str, samples: int, phases: dict[str, float], cores: int) -> None:
    """Per-phase figures, peak memory per process and the extrapolation to 10^9 samples."""
    scan, merge, no_index = phases["scan"], phases["merge+publish"], phases["merge no index"]
    index = max(merge - no_index, 1e-9)  # what index.sqlite adds to the merge
    size = os.path.getsize(os.path.join(root, ".nv-meta", "index.sqlite"))
    for name, seconds, where in (
        ("scan into the work folder", scan, f"{cores} worker processes"),
        ("merge: .tar.idx files, no index", no_index, "main process"),
        ("merge: index.sqlite build", index, "main process"),
        ("merge + publish in all", merge, "main process"),
    ):
        print(f"{name:34s} {seconds:7.1f} s {samples / seconds:12,.0f} samples/s  ({where})")
    print(f"index.sqlite {size / 2**20:.0f} MB ({size / samples:.0f} B/sample)")
    print(f"peak RSS: main process {peak_rss_mb():.0f} MB, "
          f"largest worker {peak_rss_mb(resource.RUSAGE_CHILDREN):.0f} MB")  # fmt: skip
    scale = 1e9 / samples  # linear: shards are independent, the index builds are sorts
    hours = {"scan": scan * scale / 3600, "merge": merge * scale / 3600}
    print(
        f"10^9 samples on this machine ({cores} cores): scan {hours['scan']:.1f} h + merge "
        f"{hours['merge']:.1f} h = {hours['scan'] + hours['merge']:.1f} h "
        f"({no_index * scale / 3600:.1f} h merge with --no-sample-index)"
    )
    wide = hours["scan"] * cores / 64
    print(
        f"10^9 samples on 64 cores of 8 machines: scan {wide * 60:.0f} min, then merge on rank 0 "
        f"{hours['merge']:.1f} h (one process) = {wide + hours['merge']:.1f} h"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=float, default=1e7)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--ranks", type=int, default=0)
    parser.add_argument("--random-keys", action="store_true", help="hex digests as keys")
    args = parser.parse_args()
    samples = int(args.samples)
    tmp = tempfile.mkdtemp(prefix="bench-prepare-")
    root = os.path.join(tmp, "ds")
    try:
        t = time.perf_counter()
        shards = make_shards(root, samples, args.random_keys)
        print(
            f"{samples:,} samples in {shards:,} shards written in {time.perf_counter() - t:.1f} s"
        )
        if args.ranks:
            split, merge, rss = distributed(root, args.ranks, args.workers)
            print(
                f"{args.ranks} gloo ranks: scan {split:.1f} s ({samples / split:,.0f} samples/s),"
            )
            print(f"  merge + publish on rank 0 {merge:.1f} s ({samples / merge:,.0f} samples/s),")
            print(f"  rank 0 peak RSS {rss:.0f} MB")
            return
        phases = single(root, args.workers)
        report(root, samples, phases, args.workers or os.cpu_count() or 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
