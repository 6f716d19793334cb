"""Energon's cache-pool API inside real dataloader workers (num_workers=2).

A cooker with ``need_cache`` asks ``cache.get_lazy(aux_store, name)`` for each file a crude JSONL
line names; ``encode_sample`` reads it back with ``lazy.get(sample)``. With
``get_loader(ds, cache_pool=FileStoreCachePool(...))`` every worker fetches through its own cache
folder under ``parent_cache_dir``, which is gone once the workers have exited.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    Cooker,
    EPath,
    FileCacheLazy,
    FileStore,
    FileStoreCachePool,
    TaskEncoder,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    cooker,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    stateless,
)
from stoker.format.jsonl import prepare_jsonl

LINES = 12
HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


@cooker(need_cache=True)
def cook_lazy(sample: dict[str, Any], files: FileStore, cache: Any) -> TextSample:
    """Defer reading the file the line names: the sample holds a lazy until encoding."""
    line = json.loads(sample["json"])  # raw bytes: this task encoder decodes nothing
    lazy = cache.get_lazy(files, line["file"])
    return TextSample(**basic_sample_keys(sample), text=lazy)


class ReadLazies(TaskEncoder[Any, Any, Any, Any]):
    decoder = None
    cookers = (Cooker(cook_lazy),)

    def encode_sample(self, sample: TextSample) -> TextSample:
        lazy: Any = sample.text
        cached = isinstance(lazy, FileCacheLazy) and lazy.entry.send_to_cache_future.result(30)
        folder = str(lazy.entry.cache_path.parent) if cached else ""
        data = lazy.get(sample).decode()
        pool = type(self.cache).__name__
        sample.text = json.dumps([data, cached, folder, os.getpid(), pool])
        return sample


@pytest.fixture
def crude(tmp_path: Path) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    lines = []
    for i in range(LINES):
        (folder / f"f{i:02d}.txt").write_text(f"content {i}")
        lines.append(json.dumps({"file": f"f{i:02d}.txt"}) + "\n")
    (tmp_path / "lines.jsonl").write_text("".join(lines))
    prepare_jsonl(str(tmp_path / "lines.jsonl"))
    (tmp_path / "mds.yaml").write_text(
        HEADER + "  train:\n    path: ./lines.jsonl\n    aux:\n      files: filesystem://./files\n"
    )
    return tmp_path


def test_lazies_fetch_through_each_workers_cache_folder(crude: Path) -> None:
    parent = crude / "cache"
    pool = FileStoreCachePool(parent_cache_dir=parent, num_workers=2, max_cache_size_gbytes=0.01)
    dataset = get_train_dataset(
        EPath(crude / "mds.yaml"),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=3, shuffle_buffer_size=None, max_samples_per_sequence=None, repeat=False,
        task_encoder=ReadLazies(),
    )  # fmt: skip
    with get_loader(dataset, cache_pool=pool) as loader:
        rows = [json.loads(text) for batch in loader for text in batch.text]
    pool.close()
    assert sorted(row[0] for row in rows) == sorted(f"content {i}" for i in range(LINES))
    assert all(row[1] is True for row in rows)  # every file went through the disk cache
    assert {row[4] for row in rows} == {"FileStoreCachePool"}  # TaskEncoder.cache in workers
    pids = {row[3] for row in rows}
    folders = {row[2] for row in rows}
    assert len(pids) == 2 and os.getpid() not in pids
    assert len(folders) == 2 and str(pool.cache_dir) not in folders  # one folder per worker
    assert all(Path(f).parent == parent.resolve() for f in folders)
    # Files were removed as read; the workers' folders went when they exited.
    assert [p for p in parent.rglob("*") if p.is_file()] == []
    assert not any(Path(f).exists() for f in folders)


def test_without_a_pool_cookers_get_one_that_reads_directly(crude: Path) -> None:
    dataset = get_train_dataset(
        str(crude / "mds.yaml"),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=3, shuffle_buffer_size=None, max_samples_per_sequence=None, repeat=False,
        task_encoder=ReadLazies(),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        rows = [json.loads(text) for batch in loader for text in batch.text]
    assert sorted(row[0] for row in rows) == sorted(f"content {i}" for i in range(LINES))
    assert {(row[1], row[4]) for row in rows} == {(False, "NoCachePool")}


class PackLazies(TaskEncoder[Any, Any, Any, Any]):
    """Lazies cooked into samples wait in the packing buffer; packing reads them."""

    decoder = None
    cookers = (Cooker(cook_lazy),)

    def select_samples_to_pack(self, samples: list[TextSample]) -> list[list[TextSample]]:
        return [[sample] for sample in samples]

    @stateless
    def pack_selected_samples(self, samples: list[TextSample]) -> TextSample:
        lazy: Any = samples[0].text
        samples[0].text = lazy.get(samples[0]).decode()
        return samples[0]


def packed(crude: Path, pool: FileStoreCachePool) -> Any:
    dataset = get_train_dataset(
        str(crude / "mds.yaml"),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2, shuffle_buffer_size=None, max_samples_per_sequence=None,
        packing_buffer_size=2, task_encoder=PackLazies(),
    )  # fmt: skip
    return get_savable_loader(dataset, cache_pool=pool)


def test_lazies_in_the_packing_buffer_survive_save_and_restore(crude: Path) -> None:
    pools = [FileStoreCachePool(parent_cache_dir=crude / "cache", num_workers=1) for _ in "ab"]
    with packed(crude, pools[0]) as loader:
        it = iter(loader)
        first = [next(it).text for _ in range(3)]
        state = loader.save_state_rank()
        rest = [next(it).text for _ in range(6)]
    with packed(crude, pools[1]) as restored:
        restored.restore_state_rank(state)
        it = iter(restored)
        again = [next(it).text for _ in range(6)]
    for pool in pools:
        pool.close()
    assert again == rest
    texts = [t for batch in first + rest for t in batch]
    assert all(t.startswith("content ") for t in texts)
    assert sorted(texts[:LINES]) == sorted(f"content {i}" for i in range(LINES))
