"""JPEGs decoded straight into the batch's shared memory (:class:`stoker.media.image.JpegImage`).

Where no user code sees samples before batching, RGB JPEGs stay bytes until the batcher decodes
them into reused slots of the worker's shared memory. Batches must be exactly those of the path
where user code sees decoded tensors: same values, zero padding (slots are reused, so padding
must be written), uint8 and float, in worker processes and in process; damaged JPEGs must still
fail per sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    ErrorPolicy,
    SampleDecoder,
    SampleError,
    WorkerConfig,
    get_loader,
    get_val_dataset,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.media.image import JpegImage
from stoker.pipeline.batch import batch_pad_stack
from stoker.pipeline.transport import MIN_SLOT_BYTES
from tests.conftest import write_shard
from tests.integration._images import make_noise_jpeg_dataset, noise_jpeg

#: (width, height): batches of 4 are over MIN_SLOT_BYTES as uint8, so they use slots.
SIZES = [(420, 300), (260, 410), (400, 390), (300, 280), (330, 200), (410, 350)]
BATCH = 4


def photo(i: int, size: tuple[int, int]) -> bytes:
    return noise_jpeg(i, size, quality=80)


@pytest.fixture(scope="module")
def dataset_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noise_jpeg_dataset(tmp_path_factory.mktemp("jpeg") / "ds", SIZES, quality=80)


def encoders(mode: str) -> tuple[Any, Any]:
    class Plain(DefaultTaskEncoder[Any, Any, Any, Any]):
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]

    class Seen(Plain):
        def encode_sample(self, sample: Any) -> Any:
            assert isinstance(sample.image, torch.Tensor)  # user code sees decoded tensors
            return sample

    return Plain(), Seen()


def load(root: Path, encoder: Any, workers: int, **kwargs: Any) -> list[Any]:
    dataset = get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH,
        task_encoder=encoder,
        **kwargs,
    )
    return list(get_loader(dataset))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("mode", ["torchrgb8", "torchrgb"])
def test_batches_equal_those_of_decoded_samples(
    dataset_root: Path, mode: str, workers: int
) -> None:
    plain, seen = encoders(mode)
    direct, decoded = load(dataset_root, plain, workers), load(dataset_root, seen, workers)
    assert [b.__key__ for b in direct] == [b.__key__ for b in decoded]
    assert sum(len(b.__key__) for b in direct) == 2 * len(SIZES)
    dtype = torch.uint8 if mode == "torchrgb8" else torch.float32
    assert direct[0].image.numel() * direct[0].image.element_size() > MIN_SLOT_BYTES
    for a, b in zip(direct, decoded, strict=True):
        assert a.image.dtype == dtype and a.image.is_contiguous()
        assert torch.equal(a.image, b.image)
        for i, key in enumerate(a.__key__):
            width, height = SIZES[int(key.split("_")[1])]
            assert a.image[i, :, height:, :].abs().sum() == 0  # slots are not zero-filled
            assert a.image[i, :, :, width:].abs().sum() == 0


def test_jpeg_images_decode_like_the_eager_mode(dataset_root: Path) -> None:
    data = photo(3, (33, 17))
    for mode in ("torchrgb8", "torchrgb"):
        eager = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
        image = eager.fused().decode_part("k", "jpg", data)
        assert isinstance(image, JpegImage) and image.shape == (3, 17, 33)
        expected = eager.decode_part("k", "jpg", data)
        assert torch.equal(image.tensor(), expected)
        mixed = batch_pad_stack([image, expected])  # a blend may mix them: tensors first
        assert torch.equal(mixed[0], mixed[1])


def test_a_truncated_jpeg_fails_its_sample_not_its_batch(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    good = [(f"k{i}", {"jpg": photo(i, (64, 48)), "txt": b"x"}) for i in range(7)]
    truncated = ("k7", {"jpg": photo(7, (64, 48))[:-200], "txt": b"x"})
    write_shard(root / "shard0.tar", [*good[:3], truncated, *good[3:]])
    prepare_dataset(
        str(root),
        split_parts=[("train", ".*")],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
    )
    with pytest.raises(SampleError):  # no end marker: decoded (and failed) at once
        SampleDecoder(image_decode="torchrgb8").fused().decode_part("k", "jpg", truncated[1]["jpg"])
    plain, _ = encoders("torchrgb8")
    batches = load(root, plain, 0, error_policy=ErrorPolicy(mode="skip"))
    keys = [key for batch in batches for key in batch.__key__]
    assert sorted(keys) == [f"k{i}" for i in range(7)]  # only the damaged sample is gone


def test_float_batches_reach_encode_batch_as_float32_in_the_workers(dataset_root: Path) -> None:
    """Float batches travel as uint8 only where no user code sees them in the worker: an
    ``encode_batch`` of the user's gets the float32 batch there, and the same values."""
    plain, _ = encoders("torchrgb")

    class Checked(type(plain)):  # type: ignore[misc]
        def encode_batch(self, batch: Any) -> Any:
            if batch.image.dtype != torch.float32:  # raised in the worker, re-raised here
                raise TypeError(f"encode_batch saw {batch.image.dtype}")
            return batch

    direct, checked = load(dataset_root, plain, 2), load(dataset_root, Checked(), 2)
    assert [b.__key__ for b in direct] == [b.__key__ for b in checked]
    for a, b in zip(direct, checked, strict=True):
        assert a.image.dtype == b.image.dtype == torch.float32
        assert torch.equal(a.image, b.image)
