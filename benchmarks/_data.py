"""Synthetic datasets for the benchmarks, generated once and cached on disk.

Each dataset lives in its own folder under the data dir; a ``.bench-complete`` file (written last)
marks it as finished, so an interrupted generation is redone and a finished one is reused.
Generation writes tar bytes directly (no ``tarfile`` per member) so that even 10^7 samples take
a few minutes at most.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

BLOCK = 512
COMPLETE = ".bench-complete"
#: A fixed mtime, so that generated shards are byte-identical from run to run.
MTIME = 1_700_000_000


@dataclass(frozen=True)
class DatasetSpec:
    """What to generate: ``shards`` x ``per_shard`` samples of one kind."""

    kind: str  # "images", "photos" or "tiny"
    shards: int
    per_shard: int

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.shards}x{self.per_shard}"

    @property
    def samples(self) -> int:
        return self.shards * self.per_shard


@dataclass(frozen=True)
class Dataset:
    path: Path
    spec: DatasetSpec
    shard_bytes: int


def ensure_dataset(data_dir: Path, spec: DatasetSpec, log: bool = True) -> Dataset:
    """The dataset for ``spec`` under ``data_dir``, generating it if it is not there yet."""
    path = data_dir / spec.name
    marker = path / COMPLETE
    if not marker.exists():
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        if log:
            print(f"generating {spec.name} in {path} ...", flush=True)
        if spec.kind == "images":
            write_image_shards(path, spec.shards, spec.per_shard)
        elif spec.kind == "photos":
            write_photo_shards(path, spec.shards, spec.per_shard)
        elif spec.kind == "tiny":
            write_tiny_shards(path, spec.shards, spec.per_shard)
        else:
            raise ValueError(f"unknown dataset kind {spec.kind=}")
        marker.write_text(json.dumps({"samples": spec.samples}))
    shard_bytes = sum(p.stat().st_size for p in path.glob("*.tar"))
    return Dataset(path, spec, shard_bytes)


# --- tar writing ---------------------------------------------------------------------------------


def has_module(module: str) -> bool:
    """Whether ``module`` can be imported (e.g. megatron.energon for the comparisons)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def prepare_captioning(dataset: Dataset) -> None:
    """Prepare the train split as CaptioningSample (image: jpg, caption: txt) unless done."""
    if (dataset.path / ".nv-meta" / "split.yaml").exists():
        return
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset

    print(f"preparing {dataset.path} ...", flush=True)
    prepare_dataset(
        str(dataset.path),
        split_ratio=[("train", 1.0)],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        overwrite=True,
    )


def tar_header(name: str, size: int) -> bytes:
    """One 512-byte ustar header of a regular file."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = MTIME
    info.mode = 0o644
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def _padding(size: int) -> bytes:
    return b"\0" * (-size % BLOCK)


END_OF_ARCHIVE = b"\0" * (2 * BLOCK)


# --- (A) images ----------------------------------------------------------------------------------


def noise_jpegs(count: int, target_bytes: int, seed: int = 0) -> list[bytes]:
    """``count`` JPEGs of random noise, each about ``target_bytes`` long."""
    from PIL import Image

    rng = np.random.default_rng(seed)

    def encode(side: int) -> bytes:
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        return buf.getvalue()

    side = 128  # calibrate: JPEG size of noise grows with the pixel count
    side = int(side * (target_bytes / len(encode(side))) ** 0.5)
    return [encode(side + (i % 5) - 2) for i in range(count)]


def photo_jpegs(count: int, seed: int = 0) -> list[bytes]:
    """``count`` photo-like JPEGs (smooth gradients plus texture), 256-512 px per side, ~50 KB.

    Same recipe as ``bench_jpeg.py``: unlike noise, their size per pixel is that of photos, so
    decoding them costs what decoding a photo of that size costs.
    """
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        h, w = (int(v) for v in rng.integers(256, 513, size=2))
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([xx / w, yy / h, (xx + yy) / (w + h)], axis=-1) * 200
        pixels = np.clip(base + rng.normal(0, 12, size=(h, w, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def write_image_shards(folder: Path, shards: int, per_shard: int) -> None:
    """Samples of a ~50 KB noise JPEG (50 distinct images, reused) and a caption."""
    write_caption_shards(folder, shards, per_shard, noise_jpegs(50, 50_000), "images")


def write_photo_shards(folder: Path, shards: int, per_shard: int) -> None:
    """Samples of a ~50 KB photo-like JPEG of 256-512 px (256 distinct, reused) and a caption."""
    write_caption_shards(folder, shards, per_shard, photo_jpegs(256), "photos")


def write_caption_shards(
    folder: Path, shards: int, per_shard: int, images: list[bytes], prefix: str
) -> None:
    """Image-caption samples (``.jpg``, ``.txt``) cycling through ``images`` under unique keys."""
    for shard in range(shards):
        chunks: list[bytes] = []
        for i in range(per_shard):
            key = f"img{shard:04d}_{i:06d}"
            image = images[(shard * per_shard + i) % len(images)]
            caption = f"a photo of noise number {shard * per_shard + i}".encode()
            for part, data in (("jpg", image), ("txt", caption)):
                chunks += (tar_header(f"{key}.{part}", len(data)), data, _padding(len(data)))
        chunks.append(END_OF_ARCHIVE)
        (folder / f"{prefix}_{shard:05d}.tar").write_bytes(b"".join(chunks))


# --- (B) tiny samples ----------------------------------------------------------------------------


def _digits(values: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.uint8]:
    """Zero-padded decimal digits of each value as ASCII bytes, shape (len(values), width)."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] // powers) % 10 + ord("0")).astype(np.uint8)


def _octal_digits(values: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.uint8]:
    powers = 8 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return ((values[:, None] // powers) % 8 + ord("0")).astype(np.uint8)


class TinyShardWriter:
    """Writes shards of ``per_shard`` one-member samples (``s<shard>_<i>.txt``, ~20 bytes).

    Every member is a 512-byte header plus one 512-byte data block; all headers share one
    template, so a whole shard is patched in a numpy array (names, content, checksums).
    """

    NAME = "s{shard:05d}_{i:06d}.txt"
    TEXT = "sample {shard:05d}/{i:06d}\n"

    def __init__(self, per_shard: int) -> None:
        name_len = len(self.NAME.format(shard=0, i=0))
        self.text_len = len(self.TEXT.format(shard=0, i=0))
        template = np.frombuffer(tar_header("x" * name_len, self.text_len), dtype=np.uint8)
        rows = np.zeros((per_shard, 2 * BLOCK), dtype=np.uint8)
        rows[:, :BLOCK] = template
        rows[:, 148:156] = ord(" ")  # checksum counts its own field as spaces
        i_digits = _digits(np.arange(per_shard, dtype=np.int64), 6)
        rows[:, 0] = ord("s")
        rows[:, 1:6] = ord("0")
        rows[:, 6] = ord("_")
        rows[:, 7:13] = i_digits
        rows[:, 13:17] = np.frombuffer(b".txt", dtype=np.uint8)
        text = np.frombuffer(self.TEXT.format(shard=0, i=0).encode(), dtype=np.uint8)
        rows[:, BLOCK : BLOCK + self.text_len] = text
        rows[:, BLOCK + 13 : BLOCK + 19] = i_digits
        self._rows = rows
        # Checksum without the shard digits; each shard adds the sum of its digits.
        self._base_sum = rows[:, :BLOCK].sum(axis=1, dtype=np.int64) - 5 * ord("0")

    def shard_bytes(self, shard: int) -> bytes:
        rows = self._rows
        shard_digits = _digits(np.array([shard], dtype=np.int64), 5)[0]
        rows[:, 1:6] = shard_digits
        rows[:, BLOCK + 7 : BLOCK + 12] = shard_digits
        checksum = self._base_sum + int(shard_digits.sum(dtype=np.int64))
        rows[:, 148:154] = _octal_digits(checksum, 6)
        rows[:, 154] = 0
        rows[:, 155] = ord(" ")
        return rows.tobytes() + END_OF_ARCHIVE


def write_tiny_shards(folder: Path, shards: int, per_shard: int) -> None:
    writer = TinyShardWriter(per_shard)
    for shard in range(shards):
        (folder / f"tiny_{shard:05d}.tar").write_bytes(writer.shard_bytes(shard))


def tree_cpu_s(*, children: bool = True) -> float:
    """CPU seconds (user + system) of this process and its live children (the workers): per
    sample, the cost that a busy shared machine does not blur as much as throughput.
    ``children=False``: this process only (the training process's share)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for proc in [me, *(me.children(recursive=True) if children else [])]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue  # exited between listing and reading
        total += times.user + times.system
    return total
