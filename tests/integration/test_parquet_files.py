"""One ``.parquet`` file, or an explicit list of them, as the dataset path: rows in the order the
files are given (files of other folders too), real workers, a metadataset naming a file, and
clear errors for a list naming something else or a missing file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.errors import ConfigError, StorageError
from tests.integration.test_parquet_dataset import ROWS_PER_FILE, write_parquet

pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The 3 files of a Hugging Face layout, the last moved to another folder."""
    root = write_parquet(tmp_path_factory.mktemp("pq"))
    found = sorted((root / "data").glob("*.parquet"))
    (root / "elsewhere").mkdir()
    found[2] = Path(shutil.move(found[2], root / "elsewhere" / found[2].name))
    return found


def numbers(path: Any, workers: int = 0, split_part: str = "train") -> list[int]:
    dataset = get_val_dataset(
        path,
        split_part=split_part,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=None,
    )
    with get_loader(dataset) as loader:
        return [s["n"] for s in loader]


def test_one_file_is_a_dataset(files: list[Path]) -> None:
    assert numbers(files[1]) == list(range(ROWS_PER_FILE, 2 * ROWS_PER_FILE))
    assert numbers(str(files[1])) == list(range(ROWS_PER_FILE, 2 * ROWS_PER_FILE))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_list_reads_its_files_in_the_order_given(files: list[Path], workers: int) -> None:
    got = numbers([files[2], files[0]], workers)
    expected = [*range(2 * ROWS_PER_FILE, 3 * ROWS_PER_FILE), *range(ROWS_PER_FILE)]
    assert sorted(got) == sorted(expected)
    if workers == 0:
        assert got == expected


def test_a_list_trains_with_every_row(files: list[Path]) -> None:
    dataset = get_train_dataset(
        [str(f) for f in files],
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=None,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
    )
    with get_loader(dataset) as loader:
        seen = [s["n"] for _, s in zip(range(3 * ROWS_PER_FILE), loader, strict=False)]
    assert sorted(seen) == list(range(3 * ROWS_PER_FILE))


def test_a_metadataset_names_one_file(files: list[Path], tmp_path: Path) -> None:
    mds = tmp_path / "mds.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  val:\n"
        f"    path: {files[0]}\n"
    )
    assert numbers(mds, split_part="val") == list(range(ROWS_PER_FILE))


def test_bad_lists_say_what_is_wrong(files: list[Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must name \.parquet files") as caught:
        numbers([files[0], tmp_path / "notes.txt"])
    assert "notes.txt" in str(caught.value)
    with pytest.raises(StorageError, match="Parquet file is missing") as missing:
        numbers([files[0], tmp_path / "gone.parquet"])
    assert "gone.parquet" in str(missing.value)
    with pytest.raises(ConfigError, match="is empty"):
        numbers([])


def test_load_dataset_takes_one_file(files: list[Path]) -> None:
    from stoker import load_dataset

    assert load_dataset(files[0]) == str(files[0])
    assert numbers(load_dataset(files[0])) == list(range(ROWS_PER_FILE))
