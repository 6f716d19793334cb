"""Where an image's CPU goes between the bare decode loop and a padded CHW uint8 batch.

The bare loop of ``bench_loader.py`` decodes each JPEG (libjpeg-turbo, RGB) and returns a CHW
*view* of the pixels: no batch. A loader must also put the pixels into the batch, channel
planes apart (CHW), and zero the padding of images smaller than the batch's largest. This times,
in one process and one thread (as a W=2 dataloader worker on 2 cores runs), per image:

* ``bare``: ``simplejpeg.decode_jpeg(data, colorspace="RGB")`` and a CHW view (the limit);
* ``decode RGB`` / ``decode RGBX``: the decode alone into a reused buffer;
* ``planes copy``: the RGBX buffer's channels cast into the batch's CHW planes (what stoker does
  after ``decode RGBX``);
* ``planes warm``: the same cast into one small reused image (its lines stay in cache): the
  difference to ``planes copy`` is what the first write to each line of a batch costs;
* ``padding``: zeroing what lies outside the image in a reused batch;
* ``stoker fill``: :func:`stoker.pipeline.batch_images.fill_images` into reused padded batches,
  all of the above as the loader runs it;
* ``HWC rows``: for comparison, the RGB decode put into an HWC (channels-last) batch instead.

Then ``bare / stoker fill``: the most of the bare loop's throughput a loader that builds padded
CHW batches can reach with these copies, before reading, batching and sending.

Run: ``python benchmarks/bench_image_floor.py`` (``--images 256 --repeat 5``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np
import simplejpeg
import torch

from bench_jpeg import make_jpegs

BATCH = 32
ROTATE = 4  # batches cycled through, like the loader's slots (more than the caches hold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    import stoker.pipeline.batch_images as batch_images
    from stoker.media.image import JpegImage
    from stoker.pipeline.decode import SampleDecoder

    batch_images._pool = (os.getpid(), 1, None)  # one thread, as in a W=2 worker on 2 cores
    jpegs = make_jpegs(args.images)
    sizes = [simplejpeg.decode_jpeg_header(d)[:2] for d in jpegs]
    decoder = SampleDecoder(image_decode="torchrgb8")
    images = [
        JpegImage(data, torch.Size((3, *size)), False, decoder)
        for data, size in zip(jpegs, sizes, strict=True)
    ]
    batches = [range(i, min(i + BATCH, len(jpegs))) for i in range(0, len(jpegs), BATCH)]
    shapes = [(max(sizes[i][0] for i in b), max(sizes[i][1] for i in b)) for b in batches]
    side = max(max(s) for s in sizes)
    slots = [np.full(BATCH * 3 * side * side, 7, dtype=np.uint8) for _ in range(ROTATE)]
    scratch = np.empty(4 * side * side + 3, dtype=np.uint8)

    def target(k: int, hwc: bool = False) -> np.ndarray:
        height, width = shapes[k]
        flat = slots[k % ROTATE][: len(batches[k]) * 3 * height * width]
        return flat.reshape(-1, height, width, 3) if hwc else flat.reshape(-1, 3, height, width)

    def bare(k: int) -> None:
        for i in batches[k]:
            torch.from_numpy(simplejpeg.decode_jpeg(jpegs[i], colorspace="RGB")).permute(2, 0, 1)

    def decode(colorspace: str, channels: int) -> Callable[[int], None]:
        def run(k: int) -> None:
            for i in batches[k]:
                h, w = sizes[i]
                out = scratch[: channels * h * w]
                simplejpeg.decode_jpeg(jpegs[i], colorspace=colorspace, buffer=out)

        return run

    def planes(k: int) -> None:
        out = target(k)
        for n, i in enumerate(batches[k]):
            h, w = sizes[i]
            view = np.ndarray((3, h, w), "<u4", scratch, strides=(1, 4 * w, 4))
            np.copyto(out[n, :, :h, :w], view, casting="unsafe")

    warm = np.zeros((3, side, side), dtype=np.uint8)

    def planes_warm(k: int) -> None:
        for i in batches[k]:
            h, w = sizes[i]
            view = np.ndarray((3, h, w), "<u4", scratch, strides=(1, 4 * w, 4))
            np.copyto(warm[:, :h, :w], view, casting="unsafe")

    def padding(k: int) -> None:
        out = target(k)
        for n, i in enumerate(batches[k]):
            h, w = sizes[i]
            out[n, :, h:] = 0
            out[n, :, :h, w:] = 0

    def fill(k: int) -> None:
        batch_images.fill_images(target(k), [images[i] for i in batches[k]], zeroed=False)

    def hwc_rows(k: int) -> None:
        out = target(k, hwc=True)
        for n, i in enumerate(batches[k]):
            h, w = sizes[i]
            pixels = simplejpeg.decode_jpeg(jpegs[i], colorspace="RGB", buffer=scratch[: 3 * h * w])
            out[n, :h, :w] = pixels
            out[n, h:] = 0
            out[n, :h, w:] = 0

    simplejpeg.decode_jpeg(
        jpegs[0], colorspace="RGBX", buffer=scratch[: 4 * sizes[0][0] * sizes[0][1]]
    )
    paths: list[tuple[str, Callable[[int], None]]] = [
        ("bare", bare),
        ("decode RGB", decode("RGB", 3)),
        ("decode RGBX", decode("RGBX", 4)),
        ("planes copy", planes),
        ("planes warm", planes_warm),
        ("padding", padding),
        ("stoker fill", fill),
        ("HWC rows", hwc_rows),
    ]
    best = {name: float("inf") for name, _ in paths}
    for _ in range(args.repeat):  # alternating, so that a busy spell hits every path alike
        for name, run in paths:
            start = time.process_time()
            for k in range(len(batches)):
                run(k)
            best[name] = min(best[name], (time.process_time() - start) / len(jpegs))
    print(f"{len(jpegs)} JPEGs of 256-512 px, batches of {BATCH}, one thread; CPU per image:")
    for name, seconds in best.items():
        print(f"  {name:<12} {1000 * seconds:.3f} ms")
    print(f"bare / stoker fill: {best['bare'] / best['stoker fill']:.2f}x")
    print(f"bare / HWC rows:    {best['bare'] / best['HWC rows']:.2f}x")


if __name__ == "__main__":
    main()
