"""The worker side of GPU image decoding: images kept compressed, gathered per batch.

With a GPU image mode (``SampleDecoder(image_decode="nvimgcodecrgb8", image_decode_device=0)``,
Energon's names) the workers do not decode JPEG/PNG/... parts: they read the header (size and
the pixel bound, so that a broken image fails in its worker under the error policy) and keep
the compressed bytes as a :class:`CompressedImage`. The batcher gathers a field's images into
one :class:`CompressedImages` (bytes cross the process boundary: a JPEG is ~10x smaller than its
pixels), and the loader's main process decodes it with one batched nvImageCodec call into a
zero-padded ``(B, C, H, W)`` CUDA tensor, uint8 or float32 in [0, 1]
(:mod:`stoker.media.gpu_image_decoder`). Code that needs the pixels before batching
(augmentations in ``encode_sample``) gets :class:`CompressedImage`, whose
:meth:`CompressedImage.tensor` decodes on the CPU: such pipelines gain nothing from GPU decoding
(docs/gpu.md).

Example:
    >>> batch = CompressedImages([], "nvimgcodecrgb8", 0)
    >>> batch.cpu_tensor().shape
    torch.Size([0])
"""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING, Any

import torch

from stoker.errors import SampleError, require
from stoker.media.gpu_support import cuda_usable, gpu_problem, warn_once
from stoker.media.image_modes import GPU_IMAGE_MODES, IMAGE_MODES

if TYPE_CHECKING:
    from stoker.pipeline.decode import SampleDecoder

_JPEG = ("jpg", "jpeg", "jpe", "jfif")
#: PIL band layouts -> channels of an unchanged (``nvimgcodec``) decode.
_BANDS = {"1": 1, "L": 1, "I": 1, "I;16": 1, "F": 1, "LA": 2, "P": 3, "RGB": 3, "YCbCr": 3}


@dataclasses.dataclass(frozen=True)
class CompressedImage:
    """One image part kept compressed for the GPU (see the module)."""

    data: bytes = dataclasses.field(repr=False)
    ext: str
    #: ``(C, H, W)`` of the decoded image (C as the mode makes it; ``(H, W)`` for grey modes).
    shape: torch.Size
    decoder: SampleDecoder = dataclasses.field(repr=False)

    def tensor(self) -> torch.Tensor:
        """The image decoded on the CPU in the mode's CPU layout (uint8 or float32 CHW)."""
        decoded: torch.Tensor = self.decoder.cpu_decoder().decode_part("", self.ext, self.data)
        return decoded


@dataclasses.dataclass
class CompressedImages:
    """A batch's images of one field, to be decoded into one CUDA tensor by the main process.

    ``items`` are :class:`CompressedImage` or CPU tensors (parts decoded by the workers, e.g.
    GIFs, or images a blend's other dataset decoded).
    """

    items: list[Any]
    mode: str
    device: int

    def __len__(self) -> int:
        return len(self.items)

    def cpu_tensor(self) -> torch.Tensor:
        """The batch decoded on the CPU, as the CPU mode would batch it (padded, stacked)."""
        if not self.items:
            return torch.empty(0)
        return pad_stack([_as_tensor(i) for i in self.items], torch.device("cpu"))


def compressed_image(ext: str, data: bytes, decoder: SampleDecoder) -> CompressedImage | None:
    """Check the header of an image part and keep it compressed (see the module); None for a
    JPEG without its end marker (a truncated file), which the worker decodes at once so that it
    fails there, under the error policy, rather than in the main process's batch."""
    if ext in _JPEG and not data.rstrip(b"\0").endswith(b"\xff\xd9"):
        return None
    Image = require("PIL.Image", "decoding images")
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height, bands = img.width, img.height, img.mode
    except Image.UnidentifiedImageError as e:
        raise SampleError(f"the {ext} part is not an image Pillow can read.") from e
    decoder.check_pixels(height, width)
    channels = {"L": 1, "RGB": 3, "RGBA": 4}.get(IMAGE_MODES[decoder.cpu_image_decode][2], 3)
    if decoder.image_decode == "nvimgcodec":  # the source's own channels
        channels = _BANDS.get(bands, 4 if "A" in bands else 3)
    grey = decoder.image_decode.startswith("nvimgcodecl")  # (H, W), as the CPU twin's
    dims = (height, width) if grey else (channels, height, width)
    return CompressedImage(data, ext, torch.Size(dims), decoder)


def _as_tensor(item: Any) -> torch.Tensor:
    return item.tensor() if isinstance(item, CompressedImage) else item


def pad_stack(images: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Zero-pad ``(C, H, W)`` (or ``(H, W)``) images to the largest and stack them."""
    max_size = [max(t.shape[d] for t in images) for d in range(images[0].dim())]
    out = torch.zeros((len(images), *max_size), dtype=images[0].dtype, device=device)
    for i, t in enumerate(images):
        region: tuple[Any, ...] = (i, *[slice(0, s) for s in t.shape])
        out[region] = t
    return out


def gpu_images_usable(mode: str, device: int) -> bool:
    """Whether the GPU image mode ``mode`` can decode on ``device`` here; else warn once that
    images are decoded on the CPU in the mode's CPU twin."""
    problem = gpu_problem(
        cuda=cuda_usable(device), package="nvidia.nvimgcodec", extra="gpu", device=device
    )
    if problem is None:
        return True
    warn_once(
        f"images: {problem}",
        f"image_decode={mode!r} asks for GPU image decoding, but {problem}: images are decoded "
        f"on the CPU by the workers as {GPU_IMAGE_MODES[mode]!r} (the same layout and dtype, "
        "as CPU tensors). Install stoker[gpu] on a machine with CUDA to decode on the GPU.",
        stacklevel=3,  # the code that made the SampleDecoder
    )
    return False


def compressed_batch(items: list[Any]) -> CompressedImages:
    """A batch's images of one field, some of them compressed, gathered for the GPU decode;
    other deferred images (:mod:`stoker.media.image`) are made CPU tensors."""
    first = next(i for i in items if isinstance(i, CompressedImage))
    decoder = first.decoder
    kept = [i if isinstance(i, (CompressedImage, torch.Tensor)) else i.tensor() for i in items]
    return CompressedImages(kept, decoder.image_decode, decoder.image_decode_device)
