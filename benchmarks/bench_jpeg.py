"""JPEG decode to uint8 HWC: Pillow vs simplejpeg (libjpeg-turbo), full size and reduced size.

Generates ~50 KB JPEGs of 256-512 px in memory, decodes each one ``--repeat`` times per path and
prints images/s per path, the speed-up over plain Pillow, and whether the pixels agree.
The reduced-size rows ask for at least half the size (Pillow ``draft``, simplejpeg
``min_height``/``min_width``), which lets libjpeg skip DCT work.

Run: ``python benchmarks/bench_jpeg.py --images 200 --repeat 5``
"""

from __future__ import annotations

import argparse
import io
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import simplejpeg
from PIL import Image

Array = npt.NDArray[np.uint8]


def make_jpegs(count: int, seed: int = 0, quality: int = 90) -> list[bytes]:
    """``count`` photo-like JPEGs (smooth gradients plus texture) of 256-512 px per side."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        h, w = (int(v) for v in rng.integers(256, 513, size=2))
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([xx / w, yy / h, (xx + yy) / (w + h)], axis=-1) * 200
        texture = rng.normal(0, 12, size=(h, w, 3))
        arr = np.clip(base + texture, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


def pillow_full(data: bytes) -> Array:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def simplejpeg_full(data: bytes) -> Array:
    return simplejpeg.decode_jpeg(data, colorspace="RGB")  # type: ignore[no-any-return]


def pillow_draft(data: bytes) -> Array:
    with Image.open(io.BytesIO(data)) as img:
        img.draft("RGB", (img.width // 2, img.height // 2))
        return np.asarray(img.convert("RGB"))


def simplejpeg_reduced(data: bytes) -> Array:
    h, w, _, _ = simplejpeg.decode_jpeg_header(data)
    return simplejpeg.decode_jpeg(  # type: ignore[no-any-return]
        data, colorspace="RGB", min_height=h // 2, min_width=w // 2
    )


def rate(fn: Callable[[bytes], object], images: list[bytes], repeat: int) -> float:
    """Images per second of ``fn`` over ``images``, best of ``repeat`` passes."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for data in images:
            fn(data)
        best = min(best, time.perf_counter() - start)
    return len(images) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    images = make_jpegs(args.images)
    mean_kb = sum(map(len, images)) / len(images) / 1024
    print(f"{len(images)} JPEGs, mean {mean_kb:.1f} KB, 256-512 px, best of {args.repeat}")

    same = all(np.array_equal(pillow_full(d), simplejpeg_full(d)) for d in images[:20])
    print(f"pixels identical (Pillow vs simplejpeg, full size): {same}")

    from stoker.pipeline.decode import SampleDecoder

    paths: dict[str, Callable[[bytes], object]] = {
        "pillow full": pillow_full,
        "simplejpeg full": simplejpeg_full,
        "pillow draft 1/2": pillow_draft,
        "simplejpeg min-size 1/2": simplejpeg_reduced,
    }
    for mode in ("torchrgb8", "torchrgb"):
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
        paths[f"stoker SampleDecoder {mode}"] = lambda d, dec=decoder: dec.decode_part(
            "k", "jpg", d
        )
    try:  # Energon's decoder is webdataset's image handler
        from webdataset.autodecode import imagehandler

        for mode in ("torchrgb8", "torchrgb"):
            handler = imagehandler(mode)
            paths[f"webdataset/Energon {mode}"] = lambda d, h=handler: h("x.jpg", d)
    except ImportError:
        print("webdataset not installed: no Energon rows")
    baseline = None
    for name, fn in paths.items():
        r = rate(fn, images, args.repeat)
        baseline = baseline or r
        print(f"{name:32s} {r:9.0f} img/s  x{r / baseline:4.2f} vs pillow full")


if __name__ == "__main__":
    main()
