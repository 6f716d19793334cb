"""Benchmark what the packing state costs per batch: time to make it and its pickled size.

Every batch a worker sends carries what its stream's packing buffer holds (the references of the
buffered samples), so a restore re-reads exactly those. This script runs the FFD packing workload
of ``bench_packing.py`` (log-normal document lengths, capacity 4096, "keep the rest" policy) in
one process and measures, per batch: the time spent making the stages' state, the bytes that
state takes pickled, the bytes a dataloader worker sends for it (what did not change since the
stream's last batch is sent as a marker, :mod:`stoker.runtime.held_wire`), and the bytes of a
saved state as JSON (what a checkpoint stores).

Usage::

    python benchmarks/bench_pack_state.py                  # ~30 s
    python benchmarks/bench_pack_state.py --buffers 100,1000 --samples 20000
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import stoker.runtime.stream as stream_module
from bench_packing import FFDPacking, make_data
from stoker import WorkerConfig, get_loader, get_train_dataset

try:  # what a worker sends per batch: unchanged buffer strings replaced by a marker
    from stoker.runtime.held_wire import Sender
except ImportError:  # stoker before it
    Sender = None  # type: ignore[assignment,misc]


def run(path: Path, buffer_size: int, capacity: int, min_fill: float) -> dict[str, float]:
    made: list[float] = []
    pickled: list[int] = []
    sent: list[int] = []
    sender = Sender() if Sender is not None else None
    real = stream_module.held  # what a worker sends per batch of what the stages hold

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        held = real(*args)
        made.append(time.perf_counter() - start)
        pickled.append(len(pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL)))
        wire = sender.compact(0, held) if sender is not None else held
        sent.append(len(pickle.dumps(wire, protocol=pickle.HIGHEST_PROTOCOL)))
        return held

    stream_module.held = timed
    try:
        dataset = get_train_dataset(
            str(path),
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
            batch_size=1,
            shuffle_buffer_size=1000,
            max_samples_per_sequence=None,
            virtual_workers=1,
            repeat=False,
            packing_buffer_size=buffer_size,
            task_encoder=FFDPacking(capacity, buffer_size, min_fill),
        )
        state_json: list[int] = []
        with get_loader(dataset) as loader:
            for i, _ in enumerate(loader):
                if i % 50 == 0:
                    state_json.append(len(json.dumps(loader.save_state_rank())))
    finally:
        stream_module.held = real
    return {
        "batches": len(made),
        "us_per_batch": 1e6 * sum(made) / len(made),
        "pickled": sum(pickled) / len(pickled),
        "sent": sum(sent) / len(sent),
        "json": sum(state_json) / len(state_json),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--capacity", type=int, default=4096)
    parser.add_argument("--buffers", default="100,1000,10000")
    parser.add_argument("--min-fill", type=float, default=0.99)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl"
        make_data(path, args.samples, args.capacity, 0)
        print(f"{'buffer':>7} {'batches':>8} {'state us/batch':>15} {'pickled B/batch':>16} "
              f"{'sent B/batch':>13} {'JSON B/state':>13}")  # fmt: skip
        for buffer_size in [int(b) for b in args.buffers.split(",")]:
            r = run(path, buffer_size, args.capacity, args.min_fill)
            print(f"{buffer_size:>7} {r['batches']:>8.0f} {r['us_per_batch']:>15.1f} "
                  f"{r['pickled']:>16.0f} {r['sent']:>13.0f} {r['json']:>13.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
