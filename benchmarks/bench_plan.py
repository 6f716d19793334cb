"""Planner figures: build one stream's plan over 10^9 samples and read its references.

Prints, for ``max_samples_per_sequence`` 100 and None: the time to construct the plan of one
stream (of 64) over 10^9 samples in 10^5 shards and get its first 1024 references, the rate of
iterating 10^6 positions in blocks of 1024, and the peak RSS of the process.
Run: ``python benchmarks/bench_plan.py``.
"""

from __future__ import annotations

import resource
import sys
import time

import numpy as np

from stoker.plan import StreamPlan

SAMPLES = 10**9
SHARDS = 10**5
VIRTUAL_WORKERS = 64


def shard_counts() -> np.ndarray:
    """10^5 shard sizes around 10^4 that add up to exactly 10^9."""
    rng = np.random.default_rng(0)
    counts = rng.integers(5_000, 15_000, size=SHARDS, dtype=np.int64)
    counts[-1] += SAMPLES - int(counts.sum())
    return counts


def peak_rss_mb() -> float:
    """Peak resident set size of this process (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def bench(counts: np.ndarray, msps: int | None) -> None:
    """Print construction + first-block time and iteration rate for one setting."""
    start = time.perf_counter()
    plan = StreamPlan(
        counts,
        stream=17,
        virtual_workers=VIRTUAL_WORKERS,
        seed=1234,
        max_samples_per_sequence=msps,
        parallel_shard_iters=16,
        shuffle_buffer_size=1000,
    )
    blocks = plan.iter_refs(0, block=1024)
    next(blocks)
    first = time.perf_counter() - start
    start = time.perf_counter()
    n = 0
    while n < 10**6:
        n += next(blocks).refs.size
    rate = n / (time.perf_counter() - start)
    print(
        f"msps={msps!s:>4}: slices={plan.num_slices:>7} stream samples={plan.num_samples:>9} "
        f"construct+first 1024 refs={first:.3f} s  iterate={rate / 1e6:.2f} M refs/s  "
        f"peak RSS={peak_rss_mb():.0f} MB"
    )


def main() -> None:
    """Run both settings."""
    counts = shard_counts()
    print(f"{SAMPLES:.0e} samples, {SHARDS:.0e} shards, V={VIRTUAL_WORKERS}, P=16, S=1000")
    for msps in (100, None):
        bench(counts, msps)


if __name__ == "__main__":
    main()
