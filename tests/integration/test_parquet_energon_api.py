"""Energon #227's Parquet API over stoker: ``ParquetFileStore`` (rows by number over every file,
columns filtered), ``DefaultParquetDatasetFactory`` (subflavors, decoder on and off, a subset),
a ``Cooker`` with a ``part_filter`` (with and without subflavors, 0 and 2 worker processes),
``parse_parquet_layout``, and ``WorkerConfig.worker_activate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stoker import (
    Cooker,
    CrudeSample,
    DefaultTaskEncoder,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_loader,
    get_val_dataset,
)
from stoker.energon_alias.parquet_layout import ParquetFileEntry, parse_parquet_layout
from stoker.errors import ConfigError, SampleError
from stoker.flavors.parquet import DefaultParquetDatasetFactory
from stoker.metadataset import SubsetRange
from stoker.sources.parquet_store import ParquetFileStore
from tests.integration.test_parquet_dataset import ROWS_PER_FILE, write_parquet

pytest.importorskip("datasets")
WC = WorkerConfig(rank=0, world_size=1, num_workers=0)
ROWS = 3 * ROWS_PER_FILE


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_parquet(tmp_path_factory.mktemp("pq"))


def test_file_store_numbers_rows_over_every_file(folder: Path) -> None:
    store = ParquetFileStore(folder)
    assert len(store) == ROWS
    for row in (0, ROWS_PER_FILE - 1, ROWS_PER_FILE, ROWS - 1):
        text, info = store[f"{row}.text"]
        assert text == f"caption {row}" and info.index == row
        assert info.shard_name.endswith(f"train-{row // ROWS_PER_FILE:05d}-of-00003.parquet")
    assert store["41"][0]["n"] == 41  # the whole row
    with pytest.raises(SampleError, match="numbered 0 to 89"):
        store[f"{ROWS}.text"]


def test_file_store_part_filter_reads_only_those_columns(folder: Path) -> None:
    store = ParquetFileStore(folder, part_filter=lambda c: c == "n")
    assert store.columns == ["n"] and store["5.n"][0] == 5
    assert set(store["5"][0]) == {"n"}
    with pytest.raises(SampleError, match="columns read are"):
        store["5.text"]


def test_factory_subflavors_decoder_and_subset(folder: Path) -> None:
    raw = DefaultParquetDatasetFactory(
        folder, training=False, worker_config=WC, decoder=None, subflavors={"src": "t"}
    )
    assert len(raw) == ROWS
    first = next(iter(raw.build()))
    assert first["n"] == 0 and first["__subflavors__"] == {"src": "t"}
    assert first["image"][:4] == b"\x89PNG"  # not decoded
    decoded = next(
        iter(DefaultParquetDatasetFactory(folder, training=False, worker_config=WC).build())
    )
    assert decoded["image"].shape == (3, 4, 6)  # decoded as a tar's image part
    assert raw.as_file_store()["7.n"][0] == 7
    half = DefaultParquetDatasetFactory(
        folder, training=False, worker_config=WC, subset=SubsetRange(0.5, 1.0)
    )
    assert len(half) == ROWS // 2
    assert [s["n"] for s in half.build()] == list(range(ROWS // 2, ROWS))


def test_factory_part_filter_reads_only_those_columns(folder: Path) -> None:
    factory = DefaultParquetDatasetFactory(
        folder, training=False, worker_config=WC, part_filter=lambda c: c in ("n", "text")
    )
    assert len(factory) == ROWS  # the rows stay all
    source = factory.build().sources[0]
    assert source.read_columns == ("text", "n") and source.media == {}
    reader = source.reader()
    assert reader.columns == ["text", "n"]
    samples = list(factory.build())
    assert [s["n"] for s in samples] == list(range(ROWS))
    assert all(set(s) - set(basic_sample_keys(s)) == {"n", "text"} for s in samples)
    assert samples[3]["text"] == "caption 3"
    with pytest.raises(ConfigError, match="part_filter keeps none"):
        DefaultParquetDatasetFactory(
            folder, training=False, worker_config=WC, part_filter=lambda c: False
        )


def test_factory_refuses_a_decode_map(folder: Path) -> None:
    with pytest.raises(ConfigError, match="decode_map"):
        DefaultParquetDatasetFactory(folder, training=False, worker_config=WC, decode_map={})


class KeepText(DefaultTaskEncoder[Any, Any, Any, Any]):
    def __init__(self, has_subflavors: dict[str, Any] | None) -> None:
        super().__init__()
        self.cookers = [Cooker(cook_text, has_subflavors, part_filter=lambda c: c == "text")]


def cook_text(sample: CrudeSample) -> TextSample:
    if set(sample) - {"text"} != {k for k in sample if k.startswith("__")}:
        raise AssertionError(f"columns left by the part filter: {sorted(sample)}")
    return TextSample(**basic_sample_keys(sample), text=sample["text"])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("has_subflavors", [None, {}])
def test_cooker_part_filter_gives_the_cook_only_its_columns(
    folder: Path, workers: int, has_subflavors: dict[str, Any] | None
) -> None:
    dataset = get_val_dataset(
        folder,
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=None,
        task_encoder=KeepText(has_subflavors),
    )
    with get_loader(dataset) as loader:
        texts = sorted(s.text for s in loader)
    assert texts == sorted(f"caption {i}" for i in range(ROWS))


def test_cooker_keep_parts_keeps_the_sample_class() -> None:
    sample = CrudeSample({"__key__": "k", "a": 1, "b": 2})
    kept = Cooker(cook_text, part_filter=lambda p: p == "a").keep_parts(sample)
    assert type(kept) is CrudeSample and dict(kept) == {"__key__": "k", "a": 1}


def test_parse_parquet_layout() -> None:
    raw = {
        "version": 1,
        "columns": ["a"],
        "files": [{"rel_path": "x.parquet", "num_rows": 4}],
        "total_rows": 4,
    }
    layout = parse_parquet_layout(raw)
    assert layout.files == [ParquetFileEntry("x.parquet", 4)] and layout.total_rows == 4
    with pytest.raises(ConfigError, match=r"missing keys \['total_rows'\]"):
        parse_parquet_layout({k: v for k, v in raw.items() if k != "total_rows"})
    with pytest.raises(ConfigError, match=r"files\[0\].num_rows must be an integer"):
        parse_parquet_layout({**raw, "files": [{"rel_path": "x", "num_rows": "4"}]})


def test_worker_activate_checks_the_worker() -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    config.worker_activate(1)
    config.worker_deactivate()
    with pytest.raises(ValueError, match="local_worker_id=2"):
        config.worker_activate(2)
