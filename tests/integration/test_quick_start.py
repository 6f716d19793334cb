"""The quick-start examples run as written: a worker config from its defaults, a train dataset
from a path and a batch size only, and batches indexed by field name."""

from __future__ import annotations

import pytest
import torch

from stoker import CaptioningSample, WorkerConfig, get_loader, get_train_dataset
from stoker.api import DEFAULT_MAX_SAMPLES_PER_SEQUENCE, DEFAULT_SHUFFLE_BUFFER_SIZE
from tests.integration._images import SIZE, make_image_dataset


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("quick_start")
    make_image_dataset(root, {"train": {"train_a": 20, "train_b": 20}})
    return str(root)


def test_the_quick_start_as_written(path: str) -> None:
    worker_config = WorkerConfig(num_workers=8, prefetch_factor=2, persistent_workers=True)
    train_ds = get_train_dataset(
        path,
        batch_size=32,
        shuffle_buffer_size=100,
        max_samples_per_sequence=100,
        worker_config=worker_config,
    )
    loader = get_loader(train_ds)
    assert loader.prefetch_factor == 2
    for batch in loader:
        images, captions = batch["image"], batch["caption"]
        break
    loader.close()
    assert (worker_config.rank, worker_config.world_size) == (0, 1)
    assert isinstance(batch, CaptioningSample)
    assert images.shape == (32, 3, SIZE[1], SIZE[0]) and images.dtype == torch.float32
    assert len(captions) == 32 and all(c.startswith("a photo of train_") for c in captions)


def test_a_train_dataset_from_a_path_and_a_batch_size(path: str) -> None:
    train_ds = get_train_dataset(path, batch_size=32)
    assert train_ds.worker_config == WorkerConfig.default_worker_config()
    assert train_ds.worker_config.num_workers == 4
    assert train_ds.shuffle_buffer_size == DEFAULT_SHUFFLE_BUFFER_SIZE == 100
    assert train_ds.max_samples_per_sequence == DEFAULT_MAX_SAMPLES_PER_SEQUENCE == 100
    with get_loader(train_ds) as loader:
        batch = next(iter(loader))
    assert batch["image"].shape[0] == 32
    with pytest.raises(KeyError, match=r"no field 'images' \(did you mean 'image'\?\).*caption"):
        batch["images"]
    assert "image" in batch and "images" not in batch


def test_the_worker_configs_prefetch_factor_is_the_loaders_default(path: str) -> None:
    config = WorkerConfig(num_workers=0, prefetch_factor=5)
    train_ds = get_train_dataset(path, batch_size=4, worker_config=config)
    assert get_loader(train_ds).prefetch_factor == 5
    assert get_loader(train_ds, prefetch_factor=3).prefetch_factor == 3
    assert get_loader(get_train_dataset(path, batch_size=4)).prefetch_factor == 2
