"""A small prepared image-caption dataset for loading tests.

Each sample is a solid-colour JPEG (``jpg``) and a caption (``txt``) that names the sample's key,
so a test can tell from a loaded batch which samples it holds. Shards are written with
:func:`tests.conftest.write_shard` and prepared by stoker with a ``CaptioningSample`` field map.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import Sample, write_shard

FIELD_MAP = {"image": "jpg", "caption": "txt"}
#: (width, height) of every image.
SIZE = (16, 12)


def sample_key(shard: str, i: int) -> str:
    """The key of sample ``i`` of shard ``shard`` (the shard's file stem)."""
    return f"{shard}_{i:02d}"


def caption_of(key: str) -> str:
    return f"a photo of {key}"


def colour_of(key: str) -> tuple[int, int, int]:
    r, g, b = hashlib.blake2b(key.encode(), digest_size=3).digest()
    return r, g, b


def jpeg(colour: tuple[int, int, int], size: tuple[int, int] = SIZE) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def image_samples(shard: str, count: int, corrupt: Sequence[str] = ()) -> list[Sample]:
    """``count`` samples of ``shard``; the JPEGs of keys in ``corrupt`` are truncated garbage."""
    samples = []
    for i in range(count):
        key = sample_key(shard, i)
        image = b"\xff\xd8\xff\xe0 not a jpeg" if key in corrupt else jpeg(colour_of(key))
        samples.append((key, {"jpg": image, "txt": caption_of(key).encode()}))
    return samples


def write_image_shards(
    root: Path, shards: Mapping[str, int], corrupt: Sequence[str] = ()
) -> dict[str, list[str]]:
    """Write ``{stem: sample count}`` as ``root/stem.tar``; returns the keys of each shard."""
    keys = {}
    for stem, count in shards.items():
        samples = image_samples(stem, count, corrupt)
        write_shard(root / f"{stem}.tar", samples)
        keys[stem] = [key for key, _ in samples]
    return keys


def noise_jpeg(seed: int, size: tuple[int, int], quality: int = 90) -> bytes:
    """A JPEG of random pixels, ``size`` = (width, height)."""
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="JPEG", quality=quality)
    return out.getvalue()


def make_noise_jpeg_dataset(
    root: Path, sizes: Sequence[tuple[int, int]], quality: int = 90, shards: int = 2
) -> Path:
    """A prepared ``CaptioningSample`` dataset, one train split: in each of ``shards`` shards,
    one noise JPEG of each of ``sizes`` (keys ``s{shard}_{i}``) with the caption ``x``."""
    for shard in range(shards):
        samples: list[Sample] = [
            (f"s{shard}_{i}", {"jpg": noise_jpeg(10 * shard + i, size, quality), "txt": b"x"})
            for i, size in enumerate(sizes)
        ]
        write_shard(root / f"shard{shard}.tar", samples)
    prepare_dataset(
        str(root),
        split_parts=[("train", ".*")],
        dataset_yaml=make_dataset_yaml("CaptioningSample", FIELD_MAP),
    )
    return root


def make_image_dataset(
    root: Path, splits: Mapping[str, Mapping[str, int]], corrupt: Sequence[str] = ()
) -> dict[str, list[str]]:
    """A stoker-prepared dataset: ``{split: {shard stem: sample count}}``; returns split -> keys.

    Shard stems must start with their split's name (they are assigned by that prefix).
    """
    keys: dict[str, list[str]] = {}
    for split, shards in splits.items():
        written = write_image_shards(root, shards, corrupt)
        keys[split] = [key for stem in shards for key in written[stem]]
    prepare_dataset(
        str(root),
        split_parts=[(split, split) for split in splits],
        dataset_yaml=make_dataset_yaml("CaptioningSample", FIELD_MAP),
    )
    return keys
