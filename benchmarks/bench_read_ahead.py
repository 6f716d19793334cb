"""Main-thread CPU of remote read-ahead per sample: announcing (``ShardReader.prefetch``) and
reading runs (``ShardReader.read_run``), on an in-memory remote store, no network.

The dataset is ``bench_s3.py``'s (``--shards`` x ``--per-shard`` text samples of
``--sample-bytes``); the announcements are the loader's own: one epoch is loaded from disk at W=0
and the hints its reader gets are recorded, then replayed ``--repeat`` times against a store that
holds the same files in memory and is not local (so the remote path runs: planning, the read-ahead
pool, runs taken from received requests). CPU is this thread's (``time.thread_time``), so the
pool's fetches are left out. For a load-independent figure run it under
``valgrind --tool=cachegrind`` with ``PYTHONHASHSEED=0`` at two ``--repeat`` values and divide
the difference of instructions.

Usage::

    python benchmarks/bench_read_ahead.py --repeat 20
    PYTHONPATH=/tmp/base/src python benchmarks/bench_read_ahead.py   # another tree, to compare
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

import stoker.pipeline.read_ahead as read_ahead_module
from stoker import WorkerConfig, get_loader, get_train_dataset
from stoker.pipeline.read import ShardReader
from stoker.storage import Store

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_s3 import make_dataset  # noqa: E402

Hint = tuple[list[str], np.ndarray, np.ndarray]


class MemoryStore(Store):
    """A dataset's files in memory, not local (the remote read path)."""

    def __init__(self, folder: Path) -> None:
        self.root = "mem://bench"
        self.files = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file()
        }

    def url(self, path: str) -> str:
        return f"{self.root}/{path}"

    def exists(self, path: str) -> bool:
        return path in self.files

    def is_dir(self, path: str) -> bool:
        return any(name.startswith(path + "/") for name in self.files)

    def size(self, path: str) -> int:
        return len(self.files[path])

    def open(self, path: str) -> BinaryIO:
        return io.BytesIO(self.files[path])

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        return self.files[path][offset : offset + size]

    def list_files(self, path: str = "") -> list[str]:
        return sorted(self.files)

    def write_bytes(self, path: str, data: bytes) -> None:
        raise NotImplementedError

    def publish(self, tmp_path: str, path: str) -> None:
        raise NotImplementedError

    def remove(self, path: str) -> None:
        raise NotImplementedError

    def local_path(self, path: str) -> str | None:
        return None


def record_hints(folder: Path) -> list[Hint]:
    """The hints one W=0 epoch of ``folder`` gives its reader (shards, shard ids, indices)."""
    hints: list[Hint] = []
    original = ShardReader.prefetch

    def recording(self: ShardReader, shard_ids: Any, indices: Any) -> None:
        hints.append((list(self.shards), shard_ids.copy(), indices.copy()))
        original(self, shard_ids, indices)

    ShardReader.prefetch = recording  # type: ignore[method-assign]
    try:
        config = WorkerConfig(rank=0, world_size=1, num_workers=0)
        dataset = get_train_dataset(
            str(folder), worker_config=config, batch_size=32, shuffle_buffer_size=100,
            max_samples_per_sequence=100, repeat=False,
        )  # fmt: skip
        with get_loader(dataset) as loader:
            for _ in loader:
                pass
    finally:
        ShardReader.prefetch = original  # type: ignore[method-assign]
    return hints


def replay(store: MemoryStore, hints: list[Hint], runs: bool) -> tuple[float, float, int]:
    """CPU seconds of announcing and of reading (in runs of 32) all ``hints``, and the samples."""
    read_ahead_module._PROCESS.clear()
    reader = ShardReader(store, hints[0][0])
    for shard in range(len(reader.shards)):
        reader.offsets(shard)
    announcing = reading = 0.0
    samples = 0
    for _, shard_ids, indices in hints:
        began = time.thread_time()
        reader.prefetch(shard_ids, indices)
        announcing += time.thread_time() - began
        samples += len(shard_ids)
        if not runs:
            continue
        service = read_ahead_module.read_ahead()
        while any(c.future is None or not c.future.done() for c in service._live):
            time.sleep(0.001)  # all received: the runs measure taking, not waiting
        began = time.thread_time()
        ids, idx = shard_ids.tolist(), indices.tolist()
        for k in range(0, len(ids), 32):
            out, error = reader.read_run(ids[k : k + 32], idx[k : k + 32])
            if error is not None:
                raise error
            for j in range(k + len(out), min(k + 32, len(ids))):  # a run may stop early
                reader.read(ids[j], idx[j])
        reading += time.thread_time() - began
    reader.close()
    return announcing, reading, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=500)
    parser.add_argument("--sample-bytes", type=int, default=16_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-runs", action="store_true", help="announce only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stoker-bench-ahead-") as tmp:
        folder = make_dataset(Path(tmp, "ds"), args.shards, args.per_shard, args.sample_bytes)
        hints = record_hints(folder)
        store = MemoryStore(folder)
    announcing = reading = 0.0
    samples = 0
    for _ in range(args.repeat):
        a, r, n = replay(store, hints, not args.no_runs)
        announcing, reading, samples = announcing + a, reading + r, samples + n
    print(
        f"{len(hints)} hints, {samples // args.repeat} samples per epoch; main-thread CPU per "
        f"sample: announcing {1e6 * announcing / samples:.2f} us"
        + ("" if args.no_runs else f", reading runs {1e6 * reading / samples:.2f} us")
    )


if __name__ == "__main__":
    main()
