"""A loader without workers builds each large image batch in the memory of the batch before it
once the training loop lets go of that one (:mod:`stoker.pipeline.main_buffers`): the batches
must be exactly those of fresh memory, padding zero, and a batch the loop keeps must not
change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import DefaultTaskEncoder, SampleDecoder, WorkerConfig, get_loader, get_val_dataset
from stoker.pipeline.main_buffers import MIN_BYTES
from tests.integration._images import make_noise_jpeg_dataset

#: (width, height): batches of 2 over 1 MB (uint8), padded in both dimensions.
SIZES = [(420, 380), (350, 430), (440, 300), (300, 410), (440, 420), (330, 360)]


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noise_jpeg_dataset(tmp_path_factory.mktemp("buffers") / "ds", SIZES, shards=1)


class Fused(DefaultTaskEncoder[Any, Any, Any, Any]):
    decoder = SampleDecoder(image_decode="torchrgb8")


class Unfused(Fused):
    """User code sees every sample: images decode to tensors, batched by copying them."""

    def encode_sample(self, sample: Any) -> Any:
        return sample


def loader(root: Path, encoder: Any) -> Any:
    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=2,
        task_encoder=encoder,
    )
    return get_loader(dataset)


def test_batches_in_reused_memory_equal_fresh_ones(dataset_root: Path) -> None:
    want = {tuple(b.__key__): b.image.clone() for b in loader(dataset_root, Unfused())}
    pointers, kept = set(), None
    for epoch in range(2):
        for batch in loader(dataset_root, Fused()):  # each batch dropped for the next
            assert batch.image.numel() >= MIN_BYTES
            assert torch.equal(batch.image, want[tuple(batch.__key__)])
            pointers.add(batch.image.data_ptr())
            if epoch == 0 and kept is None:
                kept, kept_copy = batch.image, batch.image.clone()
    assert len(pointers) < 2 * len(SIZES) // 2  # memory was reused
    assert kept is not None and torch.equal(kept, kept_copy)  # a kept batch is left alone
