"""Float images (Energon's default ``torchrgb``) through the loader's fused path.

Where no user code sees samples before batching, float images stay uint8 until the batcher
scales them while stacking (:class:`stoker.media.image.FloatImage`). The batches must be
exactly those of the unfused path: same values, zero padding, float32, in worker processes
(batches built in shared memory) and in process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import DefaultTaskEncoder, SampleDecoder, WorkerConfig, get_loader, get_val_dataset
from stoker.media.image import JpegImage
from stoker.runtime.build import SampleBuilder
from tests.integration._images import make_noise_jpeg_dataset

#: (width, height) of sample i: every batch pads some images in both dimensions.
SIZES = [(9, 7), (5, 11), (12, 4), (8, 8), (3, 6), (10, 10), (7, 2), (6, 9)]


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noise_jpeg_dataset(tmp_path_factory.mktemp("float") / "ds", SIZES)


class Fused(DefaultTaskEncoder[Any, Any, Any, Any]):
    """What Energon's tutorials write: a default encoder with a decoder."""

    decoder = SampleDecoder(image_decode="torchrgb")


class Unfused(Fused):
    """User code sees every sample (an identity encode_sample), so images decode to float."""

    def encode_sample(self, sample: Any) -> Any:
        assert sample.image.dtype == torch.float32  # the user sees float tensors
        return sample


def load(root: Path, encoder: Any, workers: int) -> list[Any]:
    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=3,
        task_encoder=encoder,
    )
    return list(get_loader(dataset))


@pytest.mark.parametrize("workers", [0, 2])
def test_fused_float_batches_equal_the_unfused_ones(dataset_root: Path, workers: int) -> None:
    fused, unfused = load(dataset_root, Fused(), workers), load(dataset_root, Unfused(), workers)
    assert [b.__key__ for b in fused] == [b.__key__ for b in unfused]
    assert sum(len(b.__key__) for b in fused) == 2 * len(SIZES)
    for a, b in zip(fused, unfused, strict=True):
        assert isinstance(a.image, torch.Tensor) and a.image.dtype == torch.float32
        assert torch.equal(a.image, b.image)
        for i, key in enumerate(a.__key__):
            width, height = SIZES[int(key.split("_")[1])]
            assert a.image[i, :, height:, :].abs().sum() == 0
            assert a.image[i, :, :, width:].abs().sum() == 0
            assert float(a.image[i, :, :height, :width].max()) > 0.5


def test_builder_defers_float_images_only_when_asked(dataset_root: Path) -> None:
    dataset = get_val_dataset(
        str(dataset_root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=3,
    )
    source = dataset.source
    reader = source.reader()
    try:
        raw = reader.read(0, 0)
    finally:
        reader.close()
    decoder = SampleDecoder(image_decode="torchrgb")
    deferred = SampleBuilder(source, decoder, Fused(), fuse_float_images=True).build(raw, 0)
    plain = SampleBuilder(source, decoder, Fused()).build(raw, 0)
    assert isinstance(deferred.image, JpegImage)  # a JPEG: decoded straight into the batch
    assert torch.equal(deferred.image.tensor(), plain.image)
    assert not decoder.float_images_on_batch  # the caller's decoder is left as it was
