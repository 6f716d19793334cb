"""Decode image parts: the image modes (``torchrgb8``, ``numpy``, ``pil``, ...) and their decoders.

JPEGs are decoded with libjpeg-turbo through simplejpeg where it is installed (about 1.5x
faster than Pillow, same pixels; see ``benchmarks/bench_jpeg.py``), else with Pillow; both refuse
images over the decoder's ``max_image_pixels`` and honour its ``image_min_size`` (DCT scaling).
:mod:`stoker.pipeline.decode` registers :func:`decode_image` for :data:`IMAGE_EXTENSIONS`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch

from stoker.errors import SampleError, require
from stoker.media.gpu_images import CompressedImage, compressed_image
from stoker.media.image_modes import GPU_IMAGE_EXTENSIONS, IMAGE_MODES

if TYPE_CHECKING:
    from stoker.pipeline.decode import SampleDecoder


@dataclass(frozen=True)
class FloatImage:
    """A float image (``torchrgb``-style mode) still held as its uint8 pixels.

    Where no user code sees a sample between decoding and batching, the loader decodes float
    modes to this; :func:`stoker.pipeline.batch.batch_pad_stack` then scales the pixels to
    float32 in [0, 1] while copying them into the batch: one pass over the data instead of
    three, and no per-image float buffers. The values are the same as :meth:`tensor`'s.
    """

    #: uint8 ``(C, H, W)`` (``(H, W)`` for grey), possibly a strided view of HWC pixels.
    pixels: torch.Tensor

    @property
    def shape(self) -> torch.Size:
        return self.pixels.shape

    def tensor(self) -> torch.Tensor:
        """The float32 image in [0, 1], as the float modes decode it."""
        out = np.ascontiguousarray(self.pixels.numpy(), dtype=np.float32)
        return torch.from_numpy(np.divide(out, np.float32(255.0), out=out))


@dataclass(frozen=True)
class JpegImage:
    """An RGB JPEG (``torchrgb8`` / ``torchrgb`` mode) whose pixels are decoded into its batch.

    Where no user code sees a sample between decoding and batching, the loader keeps JPEGs
    with a valid header and end marker as their bytes; :func:`stoker.pipeline.batch.batch_pad_stack`
    decodes each into a reused per-thread buffer and copies (or scales) it straight into the
    batch's shared memory, several images at once (libjpeg-turbo releases the GIL). No
    per-image array is made or kept. The values are the same as :meth:`tensor`'s, which is what
    the mode decodes to otherwise.
    """

    data: bytes
    #: ``(3, H, W)``, as the decoded tensor's.
    shape: torch.Size
    as_float: bool
    decoder: SampleDecoder

    def hwc(self, scratch: npt.NDArray[np.uint8] | None = None) -> npt.NDArray[np.uint8]:
        """The ``(H, W, 3)`` uint8 pixels, in ``scratch`` where given (big enough)."""
        import simplejpeg

        try:
            return simplejpeg.decode_jpeg(  # type: ignore[no-any-return]
                self.data, colorspace="RGB", buffer=scratch
            )
        except ValueError:  # libjpeg-turbo is strict about damaged data; Pillow decides
            return np.array(_pil_image("jpg", self.data, self.decoder, "RGB"))

    def planes(self, scratch: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32] | None:
        """The R, G and B planes, decoded into ``scratch`` (at least ``4 * H * W + 3`` bytes),
        as one ``(3, H, W)`` little-endian uint32 view whose low bytes are the channels; None
        where libjpeg-turbo refuses the data (then use :meth:`hwc`).

        libjpeg-turbo writes RGBX pixels (as fast as RGB, same values); plane ``c`` starts at
        byte ``c`` of the first pixel (the view's first stride is one byte), so that a
        truncating cast to uint8 (``np.copyto`` with ``casting="unsafe"``) takes the channels
        out in vectorised passes, where copying from an HWC view reads one byte in three, a
        byte at a time.
        """
        import simplejpeg

        _, height, width = self.shape
        try:
            simplejpeg.decode_jpeg(
                self.data, colorspace="RGBX", buffer=scratch[: 4 * height * width]
            )
        except ValueError:
            return None
        planes: npt.NDArray[np.uint32] = np.ndarray(
            (3, height, width), "<u4", scratch, strides=(1, 4 * width, 4)
        )
        return planes

    def tensor(self) -> torch.Tensor:
        """The image as the mode decodes it: uint8 CHW, or float32 CHW in [0, 1]."""
        pixels = torch.from_numpy(self.hwc()).permute(2, 0, 1)
        return FloatImage(pixels).tensor() if self.as_float else pixels


#: Images the batcher finishes (:func:`stoker.pipeline.batch.batch_pad_stack`); compressed ones
#: are batched for the main process's GPU decode.
DEFERRED_IMAGES = (FloatImage, JpegImage, CompressedImage)


def decode_image(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    """Decode an image part into the decoder's ``image_decode`` mode (numpy, torch CHW or PIL);
    GPU modes keep the parts nvImageCodec reads compressed (:mod:`stoker.media.gpu_images`)."""
    if decoder.gpu_images and ext in GPU_IMAGE_EXTENSIONS:
        kept = compressed_image(ext, data, decoder)
        if kept is not None:
            return kept
    container, as_float, channels = IMAGE_MODES[decoder.cpu_image_decode]
    if decoder.float_images_on_batch and container == "torch" and channels == "RGB":
        deferred = _deferred_jpeg(ext, data, decoder, as_float)
        if deferred is not None:
            return deferred
    arr = None
    if ext in ("jpg", "jpeg", "jpe", "jfif") and container != "pil" and channels == "RGB":
        arr = _jpeg_turbo(data, decoder)
    if arr is None:
        img = _pil_image(ext, data, decoder, channels)
        if container == "pil":
            return img
        arr = np.array(img)  # a writable copy (Pillow's buffer is read-only)
    if container == "numpy":
        return arr.astype(np.float32) / 255.0 if as_float else arr
    tensor = torch.from_numpy(arr)
    pixels = tensor.permute(2, 0, 1) if arr.ndim == 3 else tensor  # a CHW view: no copy
    if not as_float:
        return pixels
    image = FloatImage(pixels)
    return image if decoder.float_images_on_batch else image.tensor()


def _deferred_jpeg(ext: str, data: bytes, decoder: SampleDecoder, as_float: bool) -> Any:
    """A :class:`JpegImage` for a complete JPEG libjpeg-turbo reads at full size, else None.

    The header is read (and the pixel bound checked) here, so that a bad sample fails here,
    under the error policy, like an eagerly decoded one; a JPEG without its end marker (a
    truncated file) is decoded eagerly for the same reason.
    """
    if ext not in ("jpg", "jpeg", "jpe", "jfif") or decoder.image_min_size is not None:
        return None
    try:
        import simplejpeg

        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except (ImportError, ValueError):
        return None
    if colorspace not in ("YCbCr", "Gray", "RGB") or not data.rstrip(b"\0").endswith(b"\xff\xd9"):
        return None
    decoder.check_pixels(height, width)
    return JpegImage(data, torch.Size((3, height, width)), as_float, decoder)


def _jpeg_turbo(data: bytes, decoder: SampleDecoder) -> npt.NDArray[np.uint8] | None:
    """Decode an RGB/grey JPEG with libjpeg-turbo; None where Pillow must do it (CMYK, ...)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        return None  # let Pillow try, and word the error
    if colorspace not in ("YCbCr", "Gray", "RGB"):
        return None
    decoder.check_pixels(height, width)
    min_h, min_w = decoder.image_min_size or (0, 0)
    try:
        return simplejpeg.decode_jpeg(  # type: ignore[no-any-return]
            data, colorspace="RGB", min_height=min_h, min_width=min_w
        )
    except ValueError:
        return None


def _pil_image(ext: str, data: bytes, decoder: SampleDecoder, channels: str) -> Any:
    Image = require("PIL.Image", "decoding images")

    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise SampleError(f"Pillow refused the image as too large: {e}") from e
    except Image.UnidentifiedImageError as e:  # its message shows an in-memory file's repr
        raise SampleError(f"the {ext} part is not an image Pillow can read.") from e
    decoder.check_pixels(img.height, img.width)
    if decoder.image_min_size is not None and img.format == "JPEG":
        min_h, min_w = decoder.image_min_size
        img.draft(channels, (min_w, min_h))
    return img.convert(channels)
