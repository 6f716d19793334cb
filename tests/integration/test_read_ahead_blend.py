"""A blend of 50 remote datasets, 8 real worker processes: one read-ahead per worker.

Each dataloader worker reads all 50 sources. Its readers share the process's one byte budget
and one thread pool (``LoaderOptions.prefetch_bytes`` / ``prefetch_threads``), so the threads
and the bytes held per worker stay those of one read-ahead, not fifty. The batches report, from
inside the workers, what the worker's read-ahead holds and how many threads it runs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, LoaderOptions, WorkerConfig, get_loader, get_train_dataset
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.pipeline.read_ahead import read_ahead
from tests.conftest import write_shard
from tests.httpserver import RangeServer

SOURCES, WORKERS, PER_SOURCE, SAMPLE_BYTES = 50, 8, 24, 8 << 10
BUDGET, THREADS = 1 << 20, 2


class WorkerProbe(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Batches that tell what the worker making them runs: its pid, threads, read-ahead."""

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        service = read_ahead()
        return {
            "keys": [s.__key__ for s in samples],
            "pid": os.getpid(),
            "threads": threading.active_count(),
            "names": sorted(t.name for t in threading.enumerate()),
            "peak": service.peak_bytes,
            "readers": service.readers,
            "budget": service.budget,
            "pool": service.threads,
        }


@pytest.fixture(scope="module")
def blend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """50 prepared datasets served over HTTP, blended by a local metadataset YAML."""
    root = tmp_path_factory.mktemp("www")
    yaml = make_dataset_yaml("TextSample", {"text": "txt"})
    for d in range(SOURCES):
        samples = [(f"d{d}_{i:03d}", {"txt": bytes([97 + d % 26]) * SAMPLE_BYTES})
                   for i in range(PER_SOURCE)]  # fmt: skip
        write_shard(root / f"d{d}" / "train_0.tar", samples[: PER_SOURCE // 2])
        write_shard(root / f"d{d}" / "train_1.tar", samples[PER_SOURCE // 2 :])
        prepare_dataset(str(root / f"d{d}"), split_parts=[("train", "train_")], dataset_yaml=yaml)
    server = RangeServer(str(root)).start()
    try:
        entries = "".join(
            f"      - repetitions: 1\n        path: {server.url}/d{d}\n" for d in range(SOURCES)
        )
        body = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
        body += f"  train:\n    blend_epochized:\n{entries}"
        (root / "blend.yaml").write_text(body)
        yield str(root / "blend.yaml")
    finally:
        server.stop()


def test_a_50_source_blend_holds_one_read_ahead_per_worker(
    blend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_PREFETCH_THREADS", "64")  # the loader's options win in workers
    options = LoaderOptions(
        prefetch_bytes=BUDGET, prefetch_threads=THREADS, cache_dir=str(tmp_path / "cache")
    )
    dataset = get_train_dataset(
        blend,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=WORKERS),
        batch_size=4,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=WorkerProbe(),
        repeat=False,
    )
    with get_loader(dataset, options=options) as loader:
        batches = list(loader)
    keys = [k for b in batches for k in b["keys"]]
    assert len(keys) == len(set(keys)) == SOURCES * PER_SOURCE  # every sample once
    assert {k.split("_")[0] for k in keys} == {f"d{d}" for d in range(SOURCES)}
    by_worker: dict[int, list[dict[str, Any]]] = {}
    for b in batches:
        by_worker.setdefault(b["pid"], []).append(b)
    assert len(by_worker) == WORKERS and os.getpid() not in by_worker
    largest = SAMPLE_BYTES + 1536  # a sample's tar members with their headers
    for reports in by_worker.values():
        assert {(r["budget"], r["pool"]) for r in reports} == {(BUDGET, THREADS)}
        assert max(r["readers"] for r in reports) == SOURCES  # all 50 share the one service
        # The worker's main thread, its queue's feeder, fsspec's event loop, the one pool.
        assert max(r["threads"] for r in reports) <= 3 + THREADS, reports[-1]["names"]
        pools = {n for r in reports for n in r["names"] if n.startswith("stoker-prefetch")}
        assert 0 < len(pools) <= THREADS
        # One budget, plus the requests being read (a quarter budget, or a sample per reader).
        bound = BUDGET + max(BUDGET // 4, SOURCES * largest)
        peak = max(r["peak"] for r in reports)
        assert 0 < peak <= bound, f"{peak=} {bound=}"
