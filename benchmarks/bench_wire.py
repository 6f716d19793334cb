"""What a batch of small text samples costs to cross from a worker to the training process.

At ``num_workers=2`` on two cores, the workers and the training process share the CPU: every
microsecond a sample costs to cross between processes is taken from making samples. With a
sample costing ``S`` to make (stoker's CPU per sample at W=0) and ``X`` to cross, two workers on
two idle cores reach at most ``2 * S / (S + X)`` times W=0's throughput; ``bench_text.py``'s
target of 1.7x needs ``X <= 0.18 * S``.

This builds real batches of ``bench_text.py``'s workloads (the stoker loader at W=0, so the
batches are exactly those a worker sends), then times, in this one process, per batch:

* ``pack``: :func:`stoker.model.batch_wire.pack` (a batch's ``SourceInfo`` taken apart into
  columns);
* ``dumps``: pack and pickle, as a worker does
  (:class:`~stoker.pipeline.batch_pickler.BatchPickler`);
* ``loads``: unpickling in the training process (the ``SourceInfo`` rebuilt);
* ``free``: dropping the batch again;

and the same per field of the batch (pickled alone), to show which fields the time goes to.
Minimum of ``--repeat`` rounds with the collector off: a lower bound, on warm caches (in a real
run the training process reads each batch once, from memory a worker wrote).

Run: ``python benchmarks/bench_wire.py`` (``--workloads jsonl,tiny --batches 50 --repeat 40``).
"""

from __future__ import annotations

import argparse
import gc
import io
import pickle
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _text import WORKLOADS, ensure_jsonl, ensure_tiny, open_loader

REPO = Path(__file__).resolve().parent.parent
FIELDS = ("__key__", "__restore_key__", "__subflavors__", "__sources__", "text")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--workloads", default="jsonl,tiny")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    for workload in args.workloads.split(","):
        path = (
            ensure_jsonl(args.data_dir) if workload == "jsonl" else ensure_tiny(args.data_dir).path
        )
        loader = open_loader("stoker", workload, 0, path)
        batch_iter = iter(loader)
        batches = [next(batch_iter) for _ in range(args.batches)]
        loader.close()
        report(workload, batches, args.repeat)


def report(workload: str, batches: list[Any], repeat: int) -> None:
    from stoker.model.batch_wire import pack

    size = WORKLOADS[workload]
    blobs = [dump(batch) for batch in batches]
    gc.disable()
    try:
        pack_us = best_us(pack, batches, repeat)
        dumps_us = best_us(dump, batches, repeat)
        loads_us, free_us = loads_and_free_us(blobs, repeat)
        print(
            f"\n{workload} (batch {size}, {sum(map(len, blobs)) / len(blobs):,.0f} bytes pickled)"
        )
        print(f"{'':16} {'us/batch':>9} {'us/sample':>10}")
        for name, value in [("pack", pack_us), ("dumps (w/ pack)", dumps_us), ("loads", loads_us),
                            ("free", free_us)]:  # fmt: skip
            print(f"{name:16} {value:9.1f} {value / size:10.2f}")
        total = dumps_us + loads_us + free_us
        print(f"{'crossing X':16} {total:9.1f} {total / size:10.2f}")
        print("per field (pack + pickle / unpickle, us/batch):")
        for field in FIELDS:
            values = [pack({field: getattr(b, field)}) for b in batches]
            field_blobs = [pickle.dumps(v, pickle.HIGHEST_PROTOCOL) for v in values]
            out = best_us(lambda b, f=field: dump({f: getattr(b, f)}), batches, repeat)  # type: ignore[misc]
            back = best_us(pickle.loads, field_blobs, repeat)
            print(f"  {field:16} {out:7.1f} / {back:7.1f}")
    finally:
        gc.enable()


def dump(batch: Any) -> bytes:
    from stoker.model.batch_wire import pack
    from stoker.pipeline.batch_pickler import BatchPickler

    out = io.BytesIO()
    BatchPickler(out).dump(pack(batch))
    return out.getvalue()


def best_us(fn: Callable[[Any], Any], items: Sequence[Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best / len(items) * 1e6


def loads_and_free_us(blobs: list[bytes], repeat: int) -> tuple[float, float]:
    loads = free = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        made = [pickle.loads(blob) for blob in blobs]
        loaded = time.perf_counter()
        del made
        free = min(free, time.perf_counter() - loaded)
        loads = min(loads, loaded - start)
    return loads / len(blobs) * 1e6, free / len(blobs) * 1e6


if __name__ == "__main__":
    main()
