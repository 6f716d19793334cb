"""The names of the image modes a decoder takes, without importing torch or Pillow.

The CLI checks ``--image-decode`` against these before anything heavy loads.

Example:
    >>> IMAGE_MODES["torchrgb8"]
    ('torch', False, 'RGB')
"""

from __future__ import annotations

from typing import Literal

ImageDecoderType = Literal[
    "l8", "rgb8", "rgba8", "l", "rgb", "rgba", "numpy", "torchl8", "torchrgb8", "torchrgba8",
    "torch8", "torchuint8", "torchl", "torchrgb", "torch", "torchrgba",
    "pill", "pil", "pilrgb", "pilrgba", "nvimgcodecl8", "nvimgcodecrgb8", "nvimgcodecrgba8",
    "nvimgcodecl", "nvimgcodecrgb", "nvimgcodec", "nvimgcodecrgba",
]  # fmt: skip
#: Image mode -> (container, float?, channels), as in webdataset's ``imagespecs``.
IMAGE_MODES: dict[str, tuple[str, bool, str]] = {
    "l8": ("numpy", False, "L"), "rgb8": ("numpy", False, "RGB"), "numpy": ("numpy", False, "RGB"),
    "rgba8": ("numpy", False, "RGBA"), "l": ("numpy", True, "L"), "rgb": ("numpy", True, "RGB"),
    "rgba": ("numpy", True, "RGBA"), "torchl8": ("torch", False, "L"),
    "torchrgb8": ("torch", False, "RGB"), "torch8": ("torch", False, "RGB"),
    "torchuint8": ("torch", False, "RGB"), "torchrgba8": ("torch", False, "RGBA"),
    "torchl": ("torch", True, "L"), "torchrgb": ("torch", True, "RGB"),
    "torch": ("torch", True, "RGB"), "torchrgba": ("torch", True, "RGBA"),
    "pill": ("pil", False, "L"), "pil": ("pil", False, "RGB"), "pilrgb": ("pil", False, "RGB"),
    "pilrgba": ("pil", False, "RGBA"),
}  # fmt: skip
IMAGE_EXTENSIONS = (
    "jpg", "jpeg", "jpe", "jfif", "png", "apng", "webp", "bmp", "gif", "tif", "tiff",
    "ppm", "pgm", "pbm", "pnm",
)  # fmt: skip
#: GPU image modes (Energon's ``nvimgcodec*`` names) -> the CPU mode of the same layout, used
#: where CUDA or nvImageCodec is missing and for formats nvImageCodec does not read. ``8``
#: suffix: uint8, else float32 in [0, 1]; ``nvimgcodec``/``nvimgcodecrgba`` keep/force alpha.
GPU_IMAGE_MODES: dict[str, str] = {
    "nvimgcodecl8": "torchl8", "nvimgcodecrgb8": "torchrgb8", "nvimgcodecrgba8": "torchrgba8",
    "nvimgcodecl": "torchl", "nvimgcodecrgb": "torchrgb", "nvimgcodec": "torch",
    "nvimgcodecrgba": "torchrgba",
}  # fmt: skip
#: Extensions nvImageCodec decodes on the GPU (the others are decoded by the workers).
GPU_IMAGE_EXTENSIONS = (
    "jpg", "jpeg", "jpe", "jfif", "png", "bmp", "tif", "tiff", "jp2", "j2k", "jpx",
    "pnm", "ppm", "pgm", "pbm",
)  # fmt: skip
