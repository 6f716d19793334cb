"""Benchmark sequence packing: efficiency (tokens used / capacity) and samples/s per buffer size.

Data: a JSONL file of ``--samples`` documents whose token counts follow a log-normal distribution
(median ~400 tokens, sigma 1, clipped to [8, capacity]; a realistic pretraining mix of short and
long documents). Each document stores its length; ``encode_sample`` makes the token tensor.
Packing uses first-fit-decreasing (FFD, with a segment tree: O(n log n) per round) into sequences
of ``--capacity`` tokens, builds position ids and per-document segment ids, and batches 8 packs.

Two selection policies, for buffer sizes 100, 1000 and 10 000:

- ``all``: every FFD bin of the buffer is packed (Energon's only choice: what a selection leaves
  out is dropped there);
- ``full``: only bins at least ``--min-fill`` full are packed; the rest stay in stoker's buffer for
  the next round (never dropped), and the stream's last buffer is packed completely.

Prints: efficiency, packs, samples/s through ``get_train_dataset`` + ``get_loader`` (one
process, ``num_workers=0``), and the size of a saved state (JSON bytes) mid-run.

Then the token-budget section, on the issue's long tail (log-normal, mean 600, at most 8000
tokens, so some documents are longer than a pack): the CPU time spent in
``select_samples_to_pack`` per sample and per pack, and the fill ratio, of first-fit-decreasing
(bins >= ``--min-fill`` full, the rest waiting; no partial samples, so documents longer than a pack
are never packed) against :class:`stoker.TokenBudgetPacker` (partial samples), run alternately
``--repeats`` times in the same process (medians), since the machine may be loaded.

Usage::

    python benchmarks/bench_packing.py                # ~2 minutes
    python benchmarks/bench_packing.py --samples 200000 --buffers 1000
    python benchmarks/bench_packing.py --only-budget --budget-samples 20000
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from stoker import (
    DefaultTaskEncoder,
    TokenBudgetPacker,
    WorkerConfig,
    first_fit_decreasing,
    get_loader,
    get_train_dataset,
    stateless,
    token_window,
)
from stoker.format.jsonl import prepare_jsonl


class FFDPacking(DefaultTaskEncoder):  # type: ignore[type-arg]
    def __init__(self, capacity: int, buffer_size: int, min_fill: float) -> None:
        super().__init__()
        self.capacity, self.buffer_size, self.min_fill = capacity, buffer_size, min_fill
        self.used = self.packs = 0

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        n = sample["json"]["n"]
        return {"__key__": sample["__key__"], "tokens": torch.arange(n, dtype=torch.int32)}

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        lengths = [len(s["tokens"]) for s in samples]
        last = len(samples) < self.buffer_size
        threshold = 0 if last else self.min_fill * self.capacity
        return [
            [samples[i] for i in b]
            for b in first_fit_decreasing(lengths, self.capacity)
            if sum(lengths[i] for i in b) >= threshold
        ]

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        tokens = torch.zeros(self.capacity, dtype=torch.int32)
        position_ids = torch.zeros(self.capacity, dtype=torch.int32)
        segment_ids = torch.zeros(self.capacity, dtype=torch.int32)  # 0: padding
        at = 0
        for segment, s in enumerate(samples, start=1):
            n = len(s["tokens"])
            tokens[at : at + n] = s["tokens"]
            position_ids[at : at + n] = torch.arange(n)
            segment_ids[at : at + n] = segment
            at += n
        self.used += at
        self.packs += 1
        return {"tokens": tokens, "position_ids": position_ids, "segment_ids": segment_ids}

    def batch(self, samples: list[Any]) -> dict[str, torch.Tensor]:
        return {k: torch.stack([s[k] for s in samples]) for k in samples[0]}


class TimedFFD(FFDPacking):
    """FFD (bins >= ``min_fill`` full, the rest waiting) with the time spent selecting."""

    seconds = 0.0

    def select_samples_to_pack(self, samples: list[Any]) -> Any:
        start = time.perf_counter()
        try:
            return super().select_samples_to_pack(samples)
        finally:
            self.seconds += time.perf_counter() - start


def _length(sample: Any) -> int:
    return len(sample["tokens"])


class TimedBudget(TimedFFD):
    """:class:`stoker.TokenBudgetPacker` (partial samples), applying the slices before packing."""

    def __init__(self, capacity: int, buffer_size: int, min_fill: float) -> None:
        super().__init__(capacity, buffer_size, min_fill)
        self.packer = TokenBudgetPacker(capacity, _length, buffer_size=buffer_size)

    def select_samples_to_pack(self, samples: list[Any]) -> Any:
        start = time.perf_counter()
        try:
            return self.packer(samples)
        finally:
            self.seconds += time.perf_counter() - start

    @stateless
    def postencode_sample(self, sample: Any) -> dict[str, Any]:
        whole, start, stop = token_window(sample, _length)
        return {"tokens": whole["tokens"][start:stop]}


def make_data(
    path: Path, samples: int, capacity: int, seed: int, mean: float = 0, longest: int = 0
) -> int:
    """Log-normal lengths: median 400 clipped to [8, capacity]; or, with ``mean``, that mean
    (sigma 1) clipped to [1, longest]."""
    rng = np.random.default_rng(seed)
    if mean:
        raw = rng.lognormal(np.log(mean) - 0.5, 1.0, samples)
        lengths = np.clip(np.rint(raw), 1, longest).astype(int)
    else:
        lengths = np.clip(rng.lognormal(np.log(400), 1.0, samples), 8, capacity).astype(int)
    path.write_text("".join(json.dumps({"n": int(n)}) + "\n" for n in lengths))
    prepare_jsonl(str(path))
    return int(lengths.sum())


def run(
    path: Path,
    buffer_size: int,
    capacity: int,
    min_fill: float,
    kind: type[FFDPacking] = FFDPacking,
) -> dict[str, Any]:
    encoder = kind(capacity, buffer_size, min_fill)
    dataset = get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=8,
        shuffle_buffer_size=1000,
        max_samples_per_sequence=None,
        virtual_workers=1,
        repeat=False,
        packing_buffer_size=buffer_size,
        task_encoder=encoder,
    )
    state_bytes = 0
    start = time.perf_counter()
    with get_loader(dataset) as loader:
        for i, _ in enumerate(loader):
            if i == 20:
                state_bytes = len(json.dumps(loader.save_state_rank()))
    seconds = time.perf_counter() - start
    return {"used": encoder.used, "packs": encoder.packs, "seconds": seconds,
            "state": state_bytes, "select": getattr(encoder, "seconds", 0.0)}  # fmt: skip


def budget(args: argparse.Namespace, tmp: str) -> None:
    """The token-budget section (see the module)."""
    path = Path(tmp) / "long_tail.jsonl"
    n, cap, buffer = args.budget_samples, args.capacity, args.budget_buffer
    tokens = make_data(path, n, cap, args.seed, mean=600, longest=8000)
    print(f"\ntoken budget: {n} documents, {tokens} tokens (log-normal, mean 600, max 8000), "
          f"packs of {cap}, buffer {buffer}, {args.repeats} alternating runs")  # fmt: skip
    logging.getLogger("stoker").setLevel(logging.ERROR)  # FFD leaves the longest out: counted
    runs: dict[str, list[dict[str, Any]]] = {"ffd": [], "budget": []}
    for _ in range(args.repeats):
        runs["ffd"].append(run(path, buffer, cap, args.min_fill, TimedFFD))
        runs["budget"].append(run(path, buffer, cap, args.min_fill, TimedBudget))
    print(f"{'packer':>24} {'fill':>7} {'tokens packed':>13} {'packs':>6} {'us/sample':>10} "
          f"{'us/pack':>8} {'samples/s':>10}")  # fmt: skip
    names = {"ffd": "first_fit_decreasing", "budget": "TokenBudgetPacker"}
    for key, rs in runs.items():
        select = float(np.median([r["select"] for r in rs]))
        seconds = float(np.median([r["seconds"] for r in rs]))
        r = rs[0]
        print(f"{names[key]:>24} {r['used'] / (r['packs'] * cap):>7.2%} "
              f"{r['used'] / tokens:>13.2%} {r['packs']:>6} {1e6 * select / n:>10.1f} "
              f"{1e6 * select / r['packs']:>8.1f} {n / seconds:>10.0f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--capacity", type=int, default=4096)
    parser.add_argument("--buffers", default="100,1000,10000")
    parser.add_argument("--min-fill", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-samples", type=int, default=20_000)
    parser.add_argument("--budget-buffer", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only-budget", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.only_budget:
            plain(args, tmp)
        budget(args, tmp)


def plain(args: argparse.Namespace, tmp: str) -> None:
    """The first-fit-decreasing section (see the module)."""
    path = Path(tmp) / "docs.jsonl"
    tokens = make_data(path, args.samples, args.capacity, args.seed)
    print(f"{args.samples} documents, {tokens} tokens, capacity {args.capacity}, "
          f"log-normal lengths (median 400, sigma 1)")  # fmt: skip
    print(f"{'buffer':>7} {'policy':>6} {'efficiency':>10} {'packs':>7} {'samples/s':>10} "
          f"{'state (B)':>10}")  # fmt: skip
    for buffer_size in [int(b) for b in args.buffers.split(",")]:
        for policy, fill in (("all", 0.0), ("full", args.min_fill)):
            r = run(path, buffer_size, args.capacity, fill)
            assert r["used"] == tokens, "every token must be packed exactly once"
            efficiency = r["used"] / (r["packs"] * args.capacity)
            print(f"{buffer_size:>7} {policy:>6} {efficiency:>10.2%} {r['packs']:>7} "
                  f"{args.samples / r['seconds']:>10.0f} {r['state']:>10}")  # fmt: skip


if __name__ == "__main__":
    main()
