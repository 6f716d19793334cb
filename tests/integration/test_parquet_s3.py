"""A Parquet folder on S3 (the SeaweedFS server the suite starts): loads as the local one does,
reading only byte ranges of the columns asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset
from stoker.format.dataset_config import DatasetConfig, parse_field_map
from stoker.sources.load import load_source
from stoker.storage.s3 import STATS
from tests.integration.test_parquet_dataset import FILES, ROWS_PER_FILE, write_parquet
from tests.integration.test_s3 import bucket, s3_env, upload  # noqa: F401  (fixtures)

pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def folders(bucket: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:  # noqa: F811
    local = write_parquet(tmp_path_factory.mktemp("pq-s3") / "ds")
    return local, upload(bucket, local, "parquet/ds")


def _rows(path: str, workers: int) -> list[tuple[int, str, tuple[int, ...]]]:
    dataset = get_train_dataset(
        path,
        batch_size=None,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        repeat=False,
    )
    return sorted((s["n"], s["text"], tuple(s["image"].shape)) for s in get_loader(dataset))


@pytest.mark.parametrize("workers", [0, 2])
def test_s3_folder_loads_equal_to_the_local_one(folders: tuple[Path, str], workers: int) -> None:
    local, url = folders
    remote = _rows(url, workers)
    assert len(remote) == FILES * ROWS_PER_FILE
    assert remote == _rows(str(local), workers)


def test_only_the_text_columns_bytes_are_read(folders: tuple[Path, str]) -> None:
    import pyarrow.parquet as pq

    local, url = folders
    text_bytes = 0  # the compressed size of the text column of every row group
    for path in sorted(local.rglob("train-*.parquet")):
        meta = pq.ParquetFile(path).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            text_bytes += next(
                group.column(c).total_compressed_size
                for c in range(group.num_columns)
                if group.column(c).path_in_schema == "text"
            )
    source = load_source(url)
    config = DatasetConfig("TextSample", "stoker", field_map=parse_field_map({"text": "text"}, "t"))
    reader = source.__class__(**{**source.__dict__, "config": config}).reader()
    for shard_id in range(len(source.shards)):
        reader.offsets(shard_id)  # opens the file: reads its footer (not counted below)
    STATS.reset()
    texts = [
        reader.read(shard_id, row).parts["text"]
        for shard_id in range(len(source.shards))
        for row in range(ROWS_PER_FILE)
    ]
    reader.close()
    assert len(set(texts)) == FILES * ROWS_PER_FILE
    assert STATS.bytes_received <= 1.2 * text_bytes, (STATS.bytes_received, text_bytes)


def test_footers_come_from_the_metadata_cache_the_second_time(folders: tuple[Path, str]) -> None:
    _, url = folders
    source = load_source(url)  # reads every footer, and caches it
    STATS.reset()
    reader = source.reader()
    starts = [reader.offsets(shard_id) for shard_id in range(len(source.shards))]
    assert [int(s[-1]) for s in starts] == [ROWS_PER_FILE] * FILES
    assert STATS.requests.get("GET", 0) == 0  # no footer fetched again
    assert reader.read(2, 17).parts["text"] == f"caption {2 * ROWS_PER_FILE + 17}"
    reader.close()
    assert STATS.requests.get("GET", 0) >= 1
