"""The floor of a loader that gives Energon's samples: per-sample metadata against the bare loop.

Every sample stoker gives carries what Energon's carry: ``__key__``, ``__restore_key__``,
``__subflavors__`` and ``__sources__`` (a ``SourceInfo`` naming the sample's member files). For
small samples that costs as much as reading them. This measures, in one process and alternating,
per row of a Parquet row group (two columns) and per token sequence:

- ``bare``: ``bench_parquet.py``'s limit (``to_pylist`` of each row group); for tokens, each
  sequence read in a random order as megatron-core's ``IndexedDataset`` reads it
  (``np.frombuffer`` on the map, then a copy);
- ``metadata``: building those four fields for the same samples, in runs of 64, with the
  functions stoker's columnar path uses (``member_names``, ``source_infos``), and nothing else.

``bare + metadata`` is the least a loader can spend per sample while giving Energon's samples
(before shuffling, batching and the transfer from workers); the ratio printed is the best such a
loader can reach against the bare loop.

Usage::

    python benchmarks/bench_meta_floor.py        # after bench_parquet.py and bench_binidx.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from stoker.model.source_info import source_infos  # noqa: E402
from stoker.pipeline.column_raws import member_names  # noqa: E402

RUN = 64


def metadata(
    path: str, shards: list[str], keys: list[str], refs: list[int], fields: list[str]
) -> int:
    """Build the four fields of ``len(keys)`` samples in runs of :data:`RUN`; how many."""
    made = 0
    for start in range(0, len(keys), RUN):
        run_keys, run_refs = keys[start : start + RUN], refs[start : start + RUN]
        n = len(run_keys)
        names = member_names(run_keys, fields)
        infos = source_infos(n, [path] * n, run_refs, shards[start : start + RUN], names)
        restore = list(zip(repeat("Webdataset", n), repeat(path, n), run_refs, strict=True))
        batch: tuple[list[Any], ...] = (run_keys, restore, [{}] * n, list(zip(infos, strict=True)))
        made += len(batch[3])
    return made


def parquet_pair(folder: Path) -> tuple[Callable[[], int], Callable[[], int], int]:
    import pyarrow.parquet as pq

    file = sorted(folder.glob("*.parquet"))[0]
    parquet = pq.ParquetFile(file)
    tables = [parquet.read_row_group(g) for g in range(parquet.num_row_groups)]
    rows = sum(t.num_rows for t in tables)
    shard = file.name
    keys = [f"{shard}/{i}" for i in range(rows)]

    def bare() -> int:
        count = 0
        for table in tables:
            for row in table.to_pylist():
                count += row["n"] >= 0
        return count

    def meta() -> int:
        return metadata(str(folder), [shard] * rows, keys, list(range(rows)), ["text", "n"])

    return bare, meta, rows


def token_pair(prefix: Path, count: int) -> tuple[Callable[[], int], Callable[[], int], int]:
    from stoker.format.binidx import TokenIndex

    index = TokenIndex.load(f"{prefix}.idx")
    data = np.memmap(f"{prefix}.bin", dtype=np.uint8, mode="r")
    order = np.random.default_rng(1).permutation(len(index))[:count].tolist()
    pointers, lengths = index.pointers.tolist(), index.lengths.tolist()
    dtype, shard = index.dtype, Path(f"{prefix}.bin").name

    def bare() -> int:
        tokens = 0
        for i in order:
            tokens += len(np.frombuffer(data, dtype, lengths[i], pointers[i]).copy())
        return tokens

    def meta() -> int:
        keys = list(map(str, order))
        return metadata(str(prefix), [shard] * len(order), keys, order, ["tokens"])

    return bare, meta, len(order)


def measure(bare: Callable[[], int], meta: Callable[[], int], count: int, repeats: int) -> None:
    times: dict[str, list[float]] = {"bare": [], "metadata": []}
    for _ in range(repeats):
        for name, run in (("bare", bare), ("metadata", meta)):
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) / count * 1e6)
    b, m = statistics.median(times["bare"]), statistics.median(times["metadata"])
    print(
        f"  bare {b:.2f} us, metadata {m:.2f} us per sample: a loader giving both spends at "
        f"least {b + m:.2f} us, {b / (b + m):.2f}x the bare loop's rate at best"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--parquet", type=Path, default=Path("/tmp/stoker-bench-parquet/rows200000")
    )
    parser.add_argument("--tokens", type=Path, default=REPO / "bench-data" / "binidx_200000")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if any(args.parquet.glob("*.parquet")):
        print(f"Parquet rows of {args.parquet} (first file; run bench_parquet.py to make it):")
        measure(*parquet_pair(args.parquet), args.repeats)
    if Path(f"{args.tokens}.idx").exists():
        print(f"token sequences of {args.tokens} (100,000 in a random order):")
        measure(*token_pair(args.tokens, 100_000), args.repeats)


if __name__ == "__main__":
    main()
