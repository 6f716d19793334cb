"""Make the demo's raw data: a folder of JPEG images with a caption file each.

This is what a user typically starts from before `stoker pack`: ``000042.jpg`` + ``000042.txt``.
Each image shows one shape in one colour, and its caption says which.

Usage: python scripts/make_demo_files.py OUT_DIR [--count N] [--seed S] [--flat]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from PIL import Image, ImageDraw

COLOURS = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (230, 210, 40),
    "purple": (140, 60, 180),
}
SHAPES = ("circle", "square", "triangle")


def draw(
    shape: str, colour: tuple[int, int, int], size: tuple[int, int], rng: random.Random
) -> Image.Image:
    w, h = size
    image = Image.new("RGB", size, (245, 245, 240))
    pen = ImageDraw.Draw(image)
    r = min(w, h) // 3
    cx, cy = rng.randint(r, w - r), rng.randint(r, h - r)
    if shape == "circle":
        pen.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif shape == "square":
        pen.rectangle((cx - r, cy - r, cx + r, cy + r), fill=colour)
    else:
        pen.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    return image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=240)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flat", action="store_true", help="no indoor/outdoor sub-folders")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    for i in range(args.count):
        # nested folders, as users have them (or --flat)
        folder = args.out if args.flat else args.out / ("indoor" if i % 2 else "outdoor")
        folder.mkdir(parents=True, exist_ok=True)
        colour, shape = rng.choice(list(COLOURS)), rng.choice(SHAPES)
        size = (rng.choice((96, 128, 160)), rng.choice((96, 128)))
        draw(shape, COLOURS[colour], size, rng).save(folder / f"{i:06d}.jpg", quality=90)
        (folder / f"{i:06d}.txt").write_text(f"a {colour} {shape}")
    print(f"Made {args.count} image + caption pairs in {args.out}")


if __name__ == "__main__":
    main()
