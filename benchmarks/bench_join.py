"""Join index figures: join two prepared datasets of 10^6 samples each by key.

Writes the ``.nv-meta`` of two datasets (100 shards of 10^4 samples; 90% of the keys shared, in
another shard order) without the tar files, which building the index does not read, then times
``prepare_joins`` on a metadataset that joins them: reading both ``index.sqlite``, matching the
keys, writing the cached index; then the same call again (a cache hit) and the load-time build
in memory. Run: ``python benchmarks/bench_join.py [samples]``.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from stoker.format.meta import INDEX_SQLITE, INDEX_UUID, INFO_JSON
from stoker.format.sqlite_index import SqliteIndexWriter
from stoker.sources.joins import prepare_joins

SHARD_SIZE = 10_000


def write_meta(root: Path, keys: list[str], part: str) -> None:
    """``.nv-meta`` of a dataset whose shards hold ``keys`` in order (no tar files)."""
    meta = root / ".nv-meta"
    meta.mkdir(parents=True)
    shards = [f"shard_{i:05d}.tar" for i in range(len(keys) // SHARD_SIZE)]
    writer = SqliteIndexWriter(str(root / INDEX_SQLITE))
    for s in range(len(shards)):
        chunk = keys[s * SHARD_SIZE : (s + 1) * SHARD_SIZE]
        writer.add_shard(s, chunk, list(range(0, 1024 * (len(chunk) + 1), 1024)), [])
    writer.close()
    counts = dict.fromkeys(shards, SHARD_SIZE)
    (root / INFO_JSON).write_text(json.dumps({"energon_version": "bench", "shard_counts": counts}))
    (root / INDEX_UUID).write_text(f"uuid-{root.name}")
    (meta / "split.yaml").write_text(f"split_parts:\n  train: {json.dumps(shards)}\n")
    (meta / "dataset.yaml").write_text(
        "sample_type: {__module__: megatron.energon, __class__: TextSample}\n"
        f"field_map: {{text: {part}}}\n"
    )


def main(samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = [f"sample_{i:09d}" for i in range(samples)]
        start = time.perf_counter()
        write_meta(root / "images", keys, "jpg")
        shift = samples // 10  # the partner lacks the first 10% and has 10% of its own
        other = keys[shift:] + [f"other_{i:09d}" for i in range(shift)]
        write_meta(root / "captions", other[::-1], "txt")
        print(f"wrote 2 x {samples} index rows in {time.perf_counter() - start:.1f} s")
        yaml = root / "joined.yaml"
        yaml.write_text(
            "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
            "    join:\n      - path: images\n      - path: captions\n        nonmatch: skip\n"
        )
        for what in ("build + write", "cache hit"):
            start = time.perf_counter()
            (report,) = prepare_joins(str(yaml))
            seconds = time.perf_counter() - start
            print(
                f"{what:>14}: {seconds:.2f} s  matched {report.matched[0]}/{report.samples}"
                f"  up_to_date={report.up_to_date}"
            )
        for path in (root / ".stoker-joins").iterdir():
            path.unlink()
        from stoker.sources.blending import load_sources

        start = time.perf_counter()
        sources, _ = load_sources(
            str(yaml), split_part="train", training=True,
            dataset_config="dataset.yaml", split_config="split.yaml",
        )  # fmt: skip
        print(f"{'load (no cache)':>14}: {time.perf_counter() - start:.2f} s"
              f"  joined samples {sources[0].total}")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10**6)
