"""The ``index.sqlite`` build alone: N samples (one part each) in shards of 1000, rows/s, file
size and peak memory, with keys in order (``s000001_0001``...) or random (hex digests: every
row lands on a random page of the key index).

Runs in a child process per build so that peak RSS is the build's own. ``--writer FILE`` times
another ``SqliteIndexWriter`` (e.g. an older ``sqlite_index.py``) for a before/after figure.

Run: ``python benchmarks/bench_index_build.py --samples 1e6 --keys random``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from typing import Any

PER_SHARD = 1000


def _writer_class(path: str | None) -> Any:
    if path is None:
        from stoker.format.sqlite_index import SqliteIndexWriter

        return SqliteIndexWriter
    spec = importlib.util.spec_from_file_location("other_sqlite_index", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.SqliteIndexWriter


def _keys(shard: int, n: int, random_keys: bool) -> list[str]:
    if random_keys:
        return [
            hashlib.blake2b(b"%d/%d" % (shard, i), digest_size=12).hexdigest() for i in range(n)
        ]
    return [f"s{shard:06d}_{i:04d}" for i in range(n)]


def build(samples: int, random_keys: bool, writer_path: str | None, out: Any) -> None:
    writer_class = _writer_class(writer_path)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        db = os.path.join(tmp, "index.sqlite")
        t0 = time.perf_counter()
        writer = writer_class(db)
        t_make = 0.0
        for shard in range((samples + PER_SHARD - 1) // PER_SHARD):
            m0 = time.perf_counter()
            n = min(PER_SHARD, samples - shard * PER_SHARD)
            keys = _keys(shard, n, random_keys)
            offsets = list(range(0, (n + 1) * 1024, 1024))
            parts = [(i, "txt", i * 1024 + 512, 8) for i in range(n)]
            t_make += time.perf_counter() - m0
            writer.add_shard(shard, keys, offsets, parts)
        t1 = time.perf_counter()
        writer.close()
        t2 = time.perf_counter()
        out.send(
            {
                "rows": t1 - t0 - t_make,
                "indexes": t2 - t1,
                "size": os.path.getsize(db),
                "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10,
            }
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=float, default=1e6)
    parser.add_argument("--keys", choices=("ordered", "random"), default="random")
    parser.add_argument("--writer", help="another sqlite_index.py to time instead")
    args = parser.parse_args()
    samples = int(args.samples)
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.Process(
        target=build, args=(samples, args.keys == "random", args.writer, send)
    )
    child.start()
    send.close()
    try:
        result = receive.recv()
    except EOFError:
        sys.exit("the build failed (see above)")
    child.join()
    total = result["rows"] + result["indexes"]
    print(
        f"{samples:,} samples, {args.keys} keys, writer {args.writer or 'stoker'}: "
        f"rows {result['rows']:.1f} s + indexes {result['indexes']:.1f} s = {total:.1f} s "
        f"({samples / total:,.0f} samples/s), {result['size'] / 2**20:.0f} MB "
        f"({result['size'] / samples:.0f} B/sample), peak RSS {result['rss']:.0f} MB"
    )


if __name__ == "__main__":
    main()
