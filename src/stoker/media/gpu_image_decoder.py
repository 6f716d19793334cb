"""nvImageCodec on a CUDA device: the main process's batched decode of compressed images.

:func:`decode_on_gpu` turns a :class:`~stoker.media.gpu_images.CompressedImages` (what the
workers send in a GPU image mode) into one zero-padded ``(B, C, H, W)`` tensor on the device, uint8
or float32 in [0, 1], with one batched nvImageCodec call; an image nvImageCodec cannot decode is
decoded on the CPU (warned once). :class:`NVImageCodecDecoder` is Energon's per-image decoder of
its pull request #249, for code that calls it directly. Benchmark: ``benchmarks/bench_gpu.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.utils.dlpack

from stoker.errors import ConfigError, require
from stoker.media.gpu_images import CompressedImage, CompressedImages, pad_stack
from stoker.media.gpu_support import warn_once
from stoker.media.image_modes import GPU_IMAGE_EXTENSIONS, GPU_IMAGE_MODES

if TYPE_CHECKING:
    from stoker.pipeline.decode import SampleDecoder

#: nvImageCodec colour specs of each mode family, by the names its versions have used.
_COLOR_SPECS = {"l": ("GRAY", "GRAYSCALE"), "rgb": ("SRGB", "RGB"), "": ("UNCHANGED",)}


class GpuImageDecoder:
    """nvImageCodec's batched decoder on one CUDA device, made on first use (main process)."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._codec: Any = None
        self._params: dict[str, Any] = {}

    def _decoder(self) -> Any:
        if self._codec is None:
            nvimgcodec = require("nvidia.nvimgcodec", "GPU image decoding")
            self._codec = nvimgcodec.Decoder(device_id=self.device)
        return self._codec

    def _decode_params(self, mode: str) -> Any:
        if mode not in self._params:
            nvimgcodec = require("nvidia.nvimgcodec", "GPU image decoding")
            names = _COLOR_SPECS.get(mode.removeprefix("nvimgcodec").rstrip("8"), ("UNCHANGED",))
            specs = [
                getattr(nvimgcodec.ColorSpec, n) for n in names if hasattr(nvimgcodec.ColorSpec, n)
            ]
            self._params[mode] = nvimgcodec.DecodeParams(color_spec=specs[0])
        return self._params[mode]

    def decode_one(self, data: bytes, mode: str) -> torch.Tensor | None:
        """One image as a ``(C, H, W)`` tensor on this device in ``mode``; None where
        nvImageCodec cannot decode it."""
        try:
            (image,) = self._decoder().decode([data], params=self._decode_params(mode))
        except (RuntimeError, ValueError):
            return None
        if image is None:
            return None
        chw: torch.Tensor = self._chw(image, None, mode, torch.device("cuda", self.device))
        return chw if mode.endswith("8") else chw.float().div_(255.0)

    def decode(self, batch: CompressedImages) -> torch.Tensor:
        """The batch as one zero-padded tensor on this decoder's device, laid out as its CPU twin's
        batch: ``(B, C, H, W)``, ``(B, H, W)`` for the grey modes."""
        device = torch.device("cuda", self.device)
        if not batch.items:
            return torch.empty(0, device=device)
        compressed = [i for i, item in enumerate(batch.items) if isinstance(item, CompressedImage)]
        decoded = self._decoder().decode(
            [batch.items[i].data for i in compressed], params=self._decode_params(batch.mode)
        )
        images: list[Any] = list(batch.items)
        for i, image in zip(compressed, decoded, strict=True):
            images[i] = self._chw(image, batch.items[i], batch.mode, device)
        uint8 = [
            t.to(device) if t.dtype == torch.uint8 else (t * 255).round().to(torch.uint8).to(device)
            for t in images
        ]
        if batch.mode.removesuffix("8") == "nvimgcodecl":  # (H, W) items, as the CPU twin's
            uint8 = [t[0] if t.dim() == 3 else t for t in uint8]
        out = pad_stack(uint8, device)
        return out if batch.mode.endswith("8") else out.float().div_(255.0)

    def _chw(
        self, image: Any, item: CompressedImage | None, mode: str, device: torch.device
    ) -> Any:
        """One decoded image as uint8 CHW on ``device``; CPU-decoded where nvImageCodec failed."""
        if image is None and item is not None:  # a format or variant nvImageCodec lacks
            warn_once(
                f"nvimgcodec-failed-{item.ext}",
                f"nvImageCodec could not decode a {item.ext!r} image; such images are decoded "
                "on the CPU (warned once).",
            )
            from stoker.media.image import decode_image

            cpu = decode_image(item.ext, item.data, _uint8_cpu_decoder(item.decoder))
            return cpu.to(device)
        tensor = torch.utils.dlpack.from_dlpack(image).to(device)  # (a host image: copied)
        chw = tensor.permute(2, 0, 1) if tensor.dim() == 3 else tensor.unsqueeze(0)
        if mode.removesuffix("8") == "nvimgcodecrgba" and chw.shape[0] < 4:
            if chw.shape[0] == 1:
                chw = chw.expand(3, *chw.shape[1:])
            alpha = torch.full((1, *chw.shape[1:]), 255, dtype=chw.dtype, device=chw.device)
            chw = torch.cat([chw, alpha])
        return chw


def _uint8_cpu_decoder(decoder: SampleDecoder) -> SampleDecoder:
    """``decoder``'s CPU decoder in the uint8 variant of its mode (a GPU batch is scaled once,
    at its end)."""
    cpu = decoder.cpu_decoder()
    cpu.cpu_image_decode = _UINT8.get(cpu.cpu_image_decode, cpu.cpu_image_decode)
    return cpu


#: The uint8 variant of each float CPU mode a GPU mode falls back to.
_UINT8 = {
    "torchl": "torchl8",
    "torchrgb": "torchrgb8",
    "torch": "torchrgb8",
    "torchrgba": "torchrgba8",
}

#: One decoder per device, shared by the loaders of a process.
_decoders: dict[int, GpuImageDecoder] = {}


def decode_on_gpu(batch: CompressedImages) -> torch.Tensor:
    """``batch`` decoded on its CUDA device (see :class:`GpuImageDecoder`)."""
    decoder = _decoders.get(batch.device)
    if decoder is None:
        decoder = _decoders[batch.device] = GpuImageDecoder(batch.device)
    return decoder.decode(batch)


def decode_one_on_gpu(image: CompressedImage) -> torch.Tensor:
    """One compressed image decoded on its decoder's device (``(C, H, W)``)."""
    decoder = image.decoder
    batch = CompressedImages([image], decoder.image_decode, decoder.image_decode_device)
    return decode_on_gpu(batch)[0]


class NVImageCodecDecoder:
    """Energon's per-image GPU decoder (its pull request #249), for code that calls it directly:
    ``decoder(key, data)`` gives a ``(C, H, W)`` CUDA tensor, or None for a part that is not an
    image nvImageCodec reads (or fails to decode, with a warning unless ``suppress_warnings``).

    Args:
        color_space: A GPU image mode (``nvimgcodec``, ``nvimgcodecrgb8``, ...).
        device: The CUDA device.
        suppress_warnings: No warning for a failed decode.

    Loaders decode whole batches instead (``SampleDecoder(image_decode=...)``). On a machine
    with a GPU and nvImageCodec, ``NVImageCodecDecoder("nvimgcodecrgb8")("0001.jpg", data)`` is
    the image; a mode it does not know is refused first:

    Example:
        >>> NVImageCodecDecoder("rgb8")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        stoker.errors.ConfigError: unknown color_space='rgb8'...
    """

    def __init__(
        self, color_space: str = "nvimgcodec", device: int = 0, suppress_warnings: bool = False
    ) -> None:
        if color_space not in GPU_IMAGE_MODES:
            raise ConfigError(
                f"unknown {color_space=}.", hint=f"Use one of {', '.join(GPU_IMAGE_MODES)}."
            )
        require("nvidia.nvimgcodec", "GPU image decoding")
        self.color_space = color_space
        self.suppress_warnings = suppress_warnings
        self._decoder = GpuImageDecoder(device)

    def __call__(self, key: str, data: bytes) -> torch.Tensor | None:
        ext = key.lower().rpartition(".")[2]
        if ext not in GPU_IMAGE_EXTENSIONS:
            return None
        tensor = self._decoder.decode_one(data, self.color_space)
        if tensor is None and not self.suppress_warnings:
            import warnings

            warnings.warn(f"nvImageCodec could not decode {key!r}.", RuntimeWarning, stacklevel=2)
        return tensor
