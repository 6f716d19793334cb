"""The cost of ``Loader.stats()``: the same loader with stats on and off, alternating.

Two datasets: the loader benchmark's photos (JPEG decode per sample, a realistic load) and tiny
text samples (almost no work per sample: the worst case for a per-sample cost). Each run loads
every sample once with ``num_workers=0`` (all the work in this process, so CPU time measures it
whatever else the machine runs) and reports CPU microseconds per sample; the on/off runs
alternate ``--repeats`` times; the fastest runs (least disturbed by other jobs) and the
medians are compared. On a busy machine those differ by a few per cent either way, so the cost
is also computed from its parts: the clock calls one run makes per sample (counted) times the
CPU time of one call (timed alone).

Usage::

    python benchmarks/bench_stats.py --data-dir bench-data --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import DatasetSpec, ensure_dataset
from stoker import (
    DefaultTaskEncoder,
    LoaderOptions,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    prepare_dataset,
)


class Photos(DefaultTaskEncoder):  # type: ignore[type-arg]
    decoder = SampleDecoder(image_decode="torchrgb8")


def texts(root: Path, shards: int = 4, per_shard: int = 2500) -> Path:
    import io
    import tarfile

    root.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        with tarfile.open(root / f"shard_{s:03d}.tar", "w") as tar:
            for i in range(per_shard):
                data = f"sample {s} {i}".encode()
                info = tarfile.TarInfo(f"s{s}_{i:05d}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    from stoker.format.dataset_config import make_dataset_yaml

    yaml = make_dataset_yaml("TextSample", {"text": "txt"})
    prepare_dataset(str(root), split_parts=[("train", "shard_*")], dataset_yaml=yaml)
    return root


def one_pass(path: Path, encoder: Any, batch: int, stats: bool = True) -> int:
    """Samples in one pass over the train split in this process (W=0)."""
    dataset = get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=batch,
        task_encoder=encoder,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        repeat=False,
    )
    with get_loader(dataset, options=LoaderOptions(stats=stats)) as loader:
        return sum(len(b.__key__) for b in loader)


def cpu_us(path: Path, stats: bool, encoder: Any, batch: int) -> float:
    start = time.process_time()
    samples = one_pass(path, encoder, batch, stats)
    return (time.process_time() - start) / samples * 1e6


def clock_calls(path: Path, encoder: Any, batch: int) -> float:
    """Clock calls (start, stop, switch) per sample in one run with stats on."""
    from stoker.pipeline.stage_clock import CLOCK

    calls = [0]
    originals = {name: getattr(CLOCK, name) for name in ("start", "stop", "switch")}

    def counted(fn: Any) -> Any:
        def call(*args: Any) -> None:
            calls[0] += 1
            fn(*args)

        return call

    for name, fn in originals.items():
        setattr(CLOCK, name, counted(fn))
    try:
        samples = one_pass(path, encoder, batch)
    finally:
        for name in originals:
            delattr(CLOCK, name)
    return calls[0] / samples


def call_cost_us() -> float:
    """CPU microseconds of one clock call (half a start/stop pair), best of 5."""
    import timeit

    from stoker.pipeline.stage_clock import READ, StageClock

    clock = StageClock()
    n = 200_000
    timer = timeit.Timer(lambda: (clock.start(READ), clock.stop()), timer=time.process_time)
    return min(timer.repeat(5, n)) / n / 2 * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("bench-data"))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    photos = ensure_dataset(args.data_dir, DatasetSpec("photos", 4, 250)).path
    with tempfile.TemporaryDirectory() as tmp:
        text = texts(Path(tmp) / "text")
        cases = [
            ("photos (JPEG)", Path(photos), Photos(), 32),
            ("text (tiny)", text, DefaultTaskEncoder(), 64),
        ]
        for name, path, encoder, batch in cases:
            runs: dict[bool, list[float]] = {True: [], False: []}
            cpu_us(path, True, encoder, batch)  # warm the page cache and imports
            for _ in range(args.repeats):
                for stats in (False, True):
                    runs[stats].append(cpu_us(path, stats, encoder, batch))
            per_sample = clock_calls(path, encoder, batch) * call_cost_us()
            off = min(runs[False])
            print(
                f"{name:<14} clock calls cost {per_sample:.2f} µs per sample: "
                f"{per_sample / off:.2%} of the fastest stats-off run"
            )
            for label, pick in (("min", min), ("median", statistics.median)):
                on, off = pick(runs[True]), pick(runs[False])
                print(
                    f"{name:<14} {label:<6} CPU µs per sample: stats off {off:8.1f}, "
                    f"on {on:8.1f} ({(on - off) / off:+.1%})"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
