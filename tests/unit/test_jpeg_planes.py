"""JPEGs decoded into a batch plane by plane (:meth:`stoker.media.image.JpegImage.planes`).

libjpeg-turbo decodes RGBX pixels and each channel is cast out of uint32 views; the batch must
hold exactly the pixels of an RGB decode seen as CHW, for every kind of JPEG (grey, chroma
subsampling, progressive, odd sizes), as uint8 and as float, with the padding zeroed. Also: the
decode threads of a process, and the main process's scaling of uint8 batches to float.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import numpy as np
import pytest
import simplejpeg
import torch
from PIL import Image

from stoker.media.image import FloatImage, JpegImage
from stoker.pipeline.batch_images import THREADS, fill_images, threads
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.main_floats import CHUNK, scale_into

DECODER = SampleDecoder(image_decode="torchrgb8")


def encode(seed: int, size: tuple[int, int], mode: str, **options: object) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = (rng.random((size[1], size[0], 3)) * 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(out, format="JPEG", **options)
    return out.getvalue()


KINDS = [
    encode(0, (37, 23), "RGB", quality=90, subsampling=0),  # 4:4:4
    encode(1, (64, 17), "RGB", quality=50, subsampling=1),  # 4:2:2
    encode(2, (31, 45), "RGB", quality=75, subsampling=2),  # 4:2:0
    encode(3, (40, 40), "RGB", quality=85, progressive=True),
    encode(4, (13, 29), "L", quality=80),  # grey: the three planes are equal
    encode(5, (1, 1), "RGB", quality=95),
]


def jpeg_image(data: bytes, as_float: bool) -> JpegImage:
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    return JpegImage(data, torch.Size((3, height, width)), as_float, DECODER)


def expected(images: list[JpegImage], dtype: type) -> np.ndarray:
    """The batch an RGB decode seen as CHW makes (zero padded)."""
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    out = np.zeros((len(images), 3, height, width), dtype=dtype)
    for i, image in enumerate(images):
        chw = simplejpeg.decode_jpeg(image.data, colorspace="RGB").transpose(2, 0, 1)
        pixels = chw.astype(np.float32) / np.float32(255) if dtype == np.float32 else chw
        out[i, :, : chw.shape[1], : chw.shape[2]] = pixels
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_planes_fill_the_batch_like_an_rgb_decode(dtype: type) -> None:
    images = [jpeg_image(data, dtype == np.float32) for data in KINDS]
    want = expected(images, dtype)
    batch = np.full_like(want, 7)  # a reused slot: old values everywhere
    fill_images(batch, images, zeroed=False)
    assert np.array_equal(batch, want)


def test_planes_are_little_endian_views_of_one_channel_each() -> None:
    image = jpeg_image(KINDS[0], as_float=False)
    _, height, width = image.shape
    planes = image.planes(np.empty(4 * height * width + 3, dtype=np.uint8))
    assert planes is not None
    rgb = simplejpeg.decode_jpeg(image.data, colorspace="RGB")
    for channel, plane in enumerate(planes):
        assert plane.shape == (height, width)
        assert np.array_equal(plane.astype(np.uint8), rgb[:, :, channel])


def test_data_libjpeg_turbo_refuses_falls_back_to_pillow() -> None:
    data = KINDS[2]
    marker = data.index(b"\xff\xdb")  # two stray bytes before a marker: Pillow reads on
    damaged = data[:marker] + b"\0\0" + data[marker:]
    good = jpeg_image(data, as_float=False)
    image = JpegImage(damaged, good.shape, False, DECODER)
    assert image.planes(np.empty(4 * good.shape.numel(), dtype=np.uint8)) is None
    batch = np.full((1, *good.shape), 7, dtype=np.uint8)
    fill_images(batch, [image], zeroed=False)
    pillow = np.asarray(Image.open(io.BytesIO(damaged)).convert("RGB")).transpose(2, 0, 1)
    assert np.array_equal(batch[0], pillow)


def test_a_damaged_jpeg_among_good_ones_fills_its_item_in_a_reused_batch() -> None:
    data = KINDS[2]
    marker = data.index(b"\xff\xdb")
    damaged = data[:marker] + b"\0\0" + data[marker:]
    images = [jpeg_image(KINDS[0], False), jpeg_image(data, False), jpeg_image(KINDS[3], False)]
    images[1] = JpegImage(damaged, images[1].shape, False, DECODER)
    height = max(image.shape[1] for image in images)
    width = max(image.shape[2] for image in images)
    batch = np.full((3, 3, height, width), 7, dtype=np.uint8)
    fill_images(batch, images, zeroed=False)
    pillow = np.asarray(Image.open(io.BytesIO(damaged)).convert("RGB")).transpose(2, 0, 1)
    _, h, w = pillow.shape
    assert np.array_equal(batch[1, :, :h, :w], pillow)
    assert not batch[1, :, h:].any() and not batch[1, :, :, w:].any()
    for i in (0, 2):
        rgb = simplejpeg.decode_jpeg(images[i].data, colorspace="RGB").transpose(2, 0, 1)
        padded = np.zeros((3, height, width), dtype=np.uint8)
        padded[:, : rgb.shape[1], : rgb.shape[2]] = rgb
        assert np.array_equal(batch[i], padded)


def test_grey_float_images_fill_a_reused_batch_with_zero_padding() -> None:
    rng = np.random.default_rng(7)
    pixels = [torch.from_numpy(rng.integers(0, 256, s, dtype=np.uint8)) for s in [(3, 5), (4, 2)]]
    batch = np.full((2, 4, 5), 9.0, dtype=np.float32)
    fill_images(batch, [FloatImage(p) for p in pixels], zeroed=False)
    for item, p in zip(batch, pixels, strict=True):
        want = np.zeros((4, 5), dtype=np.float32)
        want[: p.shape[0], : p.shape[1]] = p.numpy() / np.float32(255)
        assert np.array_equal(item, want)


class _ThreadsOfEachWorker(torch.utils.data.IterableDataset[int]):
    def __iter__(self) -> Iterator[int]:
        yield threads()


def test_workers_decode_with_the_cores_left_to_each() -> None:
    cores = len(os.sched_getaffinity(0))
    assert threads() == min(THREADS, cores)  # this process: no dataloader worker
    loader = torch.utils.data.DataLoader(_ThreadsOfEachWorker(), batch_size=None, num_workers=2)
    assert sorted(loader) == [max(1, min(THREADS, cores // 2))] * 2


@pytest.mark.parametrize("size", [1, CHUNK - 1, 3 * CHUNK + 5])
def test_main_process_scaling_equals_numpy_divide(size: int) -> None:
    pixels = np.arange(size, dtype=np.int64).astype(np.uint8)  # every value, chunk edges
    out = np.full(size, -1.0, dtype=np.float32)
    scale_into(out, pixels)
    assert np.array_equal(out, np.divide(pixels, np.float32(255)))
    strided = np.full(size * 2, -1.0, dtype=np.float32)[::2]  # not contiguous: numpy's way
    scale_into(strided, pixels)
    assert np.array_equal(strided, out)
