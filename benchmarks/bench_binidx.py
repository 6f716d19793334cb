"""Benchmark Megatron token datasets (``.bin``/``.idx``): stoker vs megatron-core vs a bare loop.

One token dataset written by megatron-core's ``IndexedDatasetBuilder`` (``--sequences``
sequences of 16-1024 uint16 tokens, cached under ``--data-dir``). Each tool reads
``--samples`` sequences in a random order, at W = 0 and 2 worker processes, as arrays of their
own (each a copy, as a training loop gets them):

- ``stoker``: ``get_train_dataset`` (shuffled, batches of 256 lists of arrays);
- ``megatron``: megatron-core's ``IndexedDataset[i]`` over a random permutation, each sequence
  copied out of the memory map as megatron-core's ``GPTDataset`` does (it concatenates a
  sample's parts into a new array) (W = 2: a torch ``DataLoader`` over it with a shuffling
  sampler, the way Megatron-LM's own loaders drive it, whose transfer copies);
- ``megatron-view`` (W = 0 only): the same loop keeping ``IndexedDataset[i]``'s view into the
  memory map, no copy: the floor of megatron-core's indexing, not what a training step gets;
- ``bare``: ``np.memmap`` of the ``.bin``, slicing each sequence by its pointer and length
  (W = 2: two processes each reading half).

``--keep N``: the stoker and megatron-core loops keep their last N batches (as a prefetcher or
collected micro-batches do) before letting one go.

Every run is a fresh subprocess; the tools alternate, ``--repeats`` times; the table shows
medians of sequences/s, tokens/s, CPU time per sequence (the run's processes together: on a
loaded machine a steadier measure of the work than the wall clock) and the peak memory of the
run's process tree (the sum of PSS over the live processes, polled every 0.1 s:
``bench_prepare.TreeMemoryPoller``), then the ratios of stoker to the others.

Usage::

    python benchmarks/bench_binidx.py                      # ~3 minutes on 2 loaded cores
    python benchmarks/bench_binidx.py --repeats 5 --samples 200000
    python benchmarks/bench_binidx.py --before ../old/src  # + stoker of another checkout
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench_prepare import TreeMemoryPoller

REPO = Path(__file__).resolve().parent.parent
RESULT = "BENCH-RESULT "
TOOLS = ("stoker", "megatron", "megatron-view", "bare")
BATCH = 256


def ensure_data(data_dir: Path, sequences: int) -> Path:
    """The dataset's prefix (written once by megatron-core's builder)."""
    prefix = data_dir / f"binidx_{sequences}"
    if Path(f"{prefix}.idx").exists():
        return prefix
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=np.uint16)
    for start in range(0, sequences, 10_000):
        lengths = rng.integers(16, 1025, min(10_000, sequences - start)).tolist()
        tokens = torch.from_numpy(rng.integers(0, 50_000, sum(lengths)).astype(np.int64))
        builder.add_document(tokens, lengths)  # one document of 10^4 sequences
    builder.finalize(f"{prefix}.idx")
    return prefix


def run_stoker(prefix: Path, workers: int, samples: int, keep: int = 0) -> tuple[int, int]:
    from stoker import WorkerConfig, get_loader, get_train_dataset

    dataset = get_train_dataset(
        str(prefix), worker_config=WorkerConfig(0, 1, workers), batch_size=BATCH,
        shuffle_buffer_size=1000, max_samples_per_sequence=100,
    )  # fmt: skip
    docs = tokens = 0
    kept: deque[Any] = deque(maxlen=keep or None)
    with get_loader(dataset) as loader:
        for batch in loader:
            docs += len(batch["tokens"])
            tokens += sum(len(t) for t in batch["tokens"])
            if keep:
                kept.append(batch)
            if docs >= samples:
                break
    return docs, tokens


def run_megatron(
    prefix: Path, workers: int, samples: int, copy: bool = True, keep: int = 0
) -> tuple[int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    data = IndexedDataset(str(prefix))
    order = np.random.default_rng(1).permutation(len(data))[:samples]
    docs = tokens = 0
    if workers == 0:
        for i in order.tolist():
            tokens += len(np.array(data[i]) if copy else data[i])
            docs += 1
        return docs, tokens
    import torch.utils.data as tud

    loader = tud.DataLoader(
        data, batch_size=BATCH, sampler=order.tolist(), num_workers=workers,
        collate_fn=list, persistent_workers=False,
    )  # fmt: skip
    kept: deque[Any] = deque(maxlen=keep or None)
    for batch in loader:
        docs += len(batch)
        tokens += sum(len(t) for t in batch)
        if keep:
            kept.append(batch)
    return docs, tokens


def _bare_part(prefix: str, order: np.ndarray) -> tuple[int, int]:
    sys.path.insert(0, str(REPO / "src"))
    from stoker.format.binidx import TokenIndex

    index = TokenIndex.load(f"{prefix}.idx")
    tokens_of = np.memmap(f"{prefix}.bin", dtype=index.dtype, mode="r")
    size = index.dtype.itemsize
    pointers, lengths = index.pointers, index.lengths
    tokens = 0
    for i in order.tolist():
        start = int(pointers[i]) // size
        tokens += len(np.array(tokens_of[start : start + int(lengths[i])]))
    return len(order), tokens


def run_bare(prefix: Path, workers: int, samples: int) -> tuple[int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    count = len(IndexedDataset(str(prefix)))
    order = np.random.default_rng(1).permutation(count)[:samples]
    if workers == 0:
        return _bare_part(str(prefix), order)
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        parts = pool.starmap(_bare_part, [(str(prefix), p) for p in np.array_split(order, workers)])
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def cpu_seconds() -> float:
    """CPU time of this process and its children that ended."""
    own, ended = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def child_main(spec: dict[str, Any]) -> None:
    tools: dict[str, Callable[[Path, int, int], tuple[int, int]]] = {
        "stoker": run_stoker, "megatron": run_megatron, "bare": run_bare,
        "megatron-view": partial(run_megatron, copy=False),
    }  # fmt: skip
    run = tools[spec["tool"]]
    if spec.get("keep") and spec["tool"] in ("stoker", "megatron"):
        run = partial(run, keep=spec["keep"])
    with warnings.catch_warnings():  # imports (seconds: torch) are not timed
        warnings.simplefilter("ignore")
        import megatron.core.datasets.indexed_dataset  # noqa: F401
        import torch.utils.data  # noqa: F401

        from stoker import get_loader  # noqa: F401  # (loads stoker.api, imported lazily)
    start, cpu = time.perf_counter(), cpu_seconds()
    docs, tokens = run(Path(spec["prefix"]), spec["workers"], spec["samples"])
    seconds = time.perf_counter() - start
    cpu_us = (cpu_seconds() - cpu) / docs * 1e6
    result = {"docs_s": docs / seconds, "tokens_s": tokens / seconds, "cpu_us": cpu_us}
    print(RESULT + json.dumps(result), flush=True)


def in_subprocess(spec: dict[str, Any], src: Path = REPO / "src") -> dict[str, float]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=env)
    with TreeMemoryPoller(proc.pid, 0.1) as poller:
        out, err = proc.communicate(timeout=1800)
    lines = [line for line in out.decode().splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {spec} exited {proc.returncode}\n{err.decode()[-3000:]}")
    return {**json.loads(lines[-1][len(RESULT) :]), "peak_mib": poller.peak_bytes / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--sequences", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=100_000, help="sequences read per run")
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=int, default=0, help="batches the loops keep (W>0)")
    parser.add_argument(
        "--before", type=Path, help="another stoker src folder, run as tool 'before' (A/B)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child))
        return
    prefix = ensure_data(args.data_dir, args.sequences)
    workers = [int(w) for w in args.workers.split(",")]
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeats):  # alternate the tools: the machine's load hits all alike
        for w in workers:
            for tool in TOOLS if args.before is None else (*TOOLS, "before"):
                if tool == "megatron-view" and w:
                    continue  # (a DataLoader's transfer copies)
                spec = {
                    "tool": tool, "workers": w, "prefix": str(prefix), "samples": args.samples,
                    "keep": args.keep,
                }  # fmt: skip
                if tool == "before":
                    spec["tool"] = "stoker"
                    result = in_subprocess(spec, args.before.resolve())
                else:
                    result = in_subprocess(spec)
                runs.setdefault((tool, w), []).append(result)
    median = {
        key: {m: statistics.median(r[m] for r in rs) for m in rs[0]} for key, rs in runs.items()
    }
    print(f"{args.samples:,} random sequences of {args.sequences:,} (uint16, 16-1024 tokens), "
          f"medians of {args.repeats}")  # fmt: skip
    print(
        f"{'tool':10} {'W':>2} {'sequences/s':>12} {'Mtokens/s':>10} {'CPU us/seq':>11} "
        f"{'peak MiB':>9}"
    )
    for (tool, w), m in median.items():
        print(
            f"{tool:10} {w:>2} {m['docs_s']:>12,.0f} {m['tokens_s'] / 1e6:>10.1f} "
            f"{m['cpu_us']:>11.1f} {m['peak_mib']:>9.0f}"
        )
    for w in workers:
        ours, cpu = median[("stoker", w)]["docs_s"], median[("stoker", w)]["cpu_us"]
        bare, megatron = median[("bare", w)], median[("megatron", w)]
        print(
            f"W={w}: stoker / bare memmap {ours / bare['docs_s']:.2f}x, "
            f"stoker / megatron-core {ours / megatron['docs_s']:.2f}x "
            f"(per CPU second: {bare['cpu_us'] / cpu:.2f}x, {megatron['cpu_us'] / cpu:.2f}x)"
        )
        if ("megatron-view", w) in median:
            view = median[("megatron-view", w)]["docs_s"]
            print(f"W={w}: stoker / megatron-core without the copy {ours / view:.2f}x")


if __name__ == "__main__":
    main()
