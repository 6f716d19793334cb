"""Decode a sample's parts by extension: images, text, numbers, JSON, numpy, torch, msgpack, cbor.

Images include JPEG 2000 (``jp2``, ``j2k``, ``jpx``), decoded by Pillow where it has OpenJPEG.

The extension is the last dot-component of the part name, lower-cased (``seg.JPG`` -> ``jpg``);
``name.gz`` parts are decompressed and decoded by their inner extension. Unknown extensions stay
bytes. ``pickle``/``pyd`` parts are unpickled as plain data only (containers, numbers, strings,
numpy arrays: :mod:`stoker.pipeline.decode_pickle`), since data files must not run code.
Video and audio parts become lazy :class:`stoker.media.av_decoder.AVDecoder` objects (or, by
``av_decode``, open PyAV containers or fully decoded ``AVData``); PyAV loads on first use.

JPEGs are decoded with libjpeg-turbo through simplejpeg where it is installed (about 1.5x
faster than Pillow, same pixels; see ``benchmarks/bench_jpeg.py``), else with Pillow
(:mod:`stoker.media.image`).
"""

from __future__ import annotations

import copy
import functools
import gzip
import io
import json
from collections.abc import Callable, Iterable
from typing import Any, Literal

import numpy as np
import torch

from stoker.errors import ConfigError, MissingDependencyError, SampleError
from stoker.format.magic import guess_extension as guess_extension
from stoker.media.gpu_image_decoder import decode_one_on_gpu
from stoker.media.gpu_images import CompressedImage, gpu_images_usable
from stoker.media.image import decode_image
from stoker.media.image_modes import GPU_IMAGE_MODES as GPU_IMAGE_MODES
from stoker.media.image_modes import IMAGE_EXTENSIONS as IMAGE_EXTENSIONS
from stoker.media.image_modes import IMAGE_MODES as IMAGE_MODES
from stoker.media.image_modes import ImageDecoderType as ImageDecoderType

AVDecoderType = Literal["torch", "AVDecoder", "pyav"]
#: A part decoder: (extension, bytes, the SampleDecoder with its options) -> decoded value.
PartDecoder = Callable[[str, bytes, "SampleDecoder"], Any]

AV_EXTENSIONS = (
    "mp4", "mov", "m4v", "mkv", "webm", "avi", "wav", "flac", "mp3", "ogg", "m4a", "aac",
)  # fmt: skip
_DECODERS: dict[str, PartDecoder] = {}


def register_decoder(extensions: str | Iterable[str], fn: PartDecoder) -> None:
    """Decode parts with these extensions (space-separated or a list) by ``fn``.

    Example:
        >>> register_decoder("raw16 raw32", lambda ext, data, decoder: data)
        >>> "raw16" in registered_extensions()
        True
    """
    names = extensions.split() if isinstance(extensions, str) else list(extensions)
    for ext in names:
        _DECODERS[ext.lower().lstrip(".")] = fn


def registered_extensions() -> list[str]:
    """The extensions that have a decoder (everything else stays bytes)."""
    return sorted(_DECODERS)


class SampleDecoder:
    """Decodes the parts of samples; the options mirror Energon's ``SampleDecoder``.

    Args:
        image_decode: Image mode (see :data:`IMAGE_MODES`); ``torchrgb`` = float32 CHW in [0, 1].
            Prefer ``torchrgb8`` (uint8) and convert to float on the GPU.
        av_decode, video_decode_audio: Options for the registered AV decoder.
        guess_content: Choose the decoder from the bytes' magic number instead of the extension.
        max_image_pixels: Refuse (per-sample error) images with more pixels than this.
        image_min_size: ``(height, width)``: decode JPEGs at a reduced scale (DCT scaling) while
            staying at least this large; ``None`` decodes at full size.
        image_decode_device: The CUDA device of the GPU image modes (``nvimgcodec*``: workers
            send compressed images, the main process decodes each batch with nvImageCodec;
            see :mod:`stoker.media.gpu_images` and docs/gpu.md).
        video_decode_device: Decode the video of :class:`~stoker.media.av_decoder.AVDecoder`
            parts on this CUDA device (NVDEC through PyNvVideoCodec); None decodes on the CPU.

    Example:
        >>> SampleDecoder(image_decode="torchrgb8").decode("k", {"txt": b"hi"})
        {'txt': 'hi'}
    """

    def __init__(
        self,
        *,
        image_decode: ImageDecoderType = "torchrgb",
        av_decode: AVDecoderType = "AVDecoder",
        video_decode_audio: bool = False,
        guess_content: bool = False,
        max_image_pixels: int = 2**28,
        image_min_size: tuple[int, int] | None = None,
        image_decode_device: int = 0,
        video_decode_device: int | None = None,
    ) -> None:
        if image_decode not in IMAGE_MODES and image_decode not in GPU_IMAGE_MODES:
            raise ConfigError(
                f"unknown {image_decode=}.",
                hint=f"Use one of {', '.join([*IMAGE_MODES, *GPU_IMAGE_MODES])}.",
            )
        if av_decode not in ("torch", "AVDecoder", "pyav"):
            raise ConfigError(f"unknown {av_decode=}.", hint="Use 'AVDecoder', 'torch' or 'pyav'.")
        self.image_decode = image_decode
        self.av_decode = av_decode
        self.video_decode_audio = video_decode_audio
        self.guess_content = guess_content
        self.max_image_pixels = max_image_pixels
        self.image_min_size = image_min_size
        self.image_decode_device = image_decode_device
        self.video_decode_device = video_decode_device
        #: The mode the workers decode images to on the CPU (a GPU mode's CPU twin).
        self.cpu_image_decode: str = GPU_IMAGE_MODES.get(image_decode, image_decode)
        #: Whether image parts stay compressed for the main process's GPU decode (a GPU mode
        #: where CUDA and nvImageCodec are there; else the CPU twin, with one warning).
        self.gpu_images = image_decode in GPU_IMAGE_MODES and gpu_images_usable(
            image_decode, image_decode_device
        )
        #: Leave images to the batcher (RGB torch modes: JPEGs as :class:`JpegImage`, decoded
        #: into the batch; other float images as :class:`FloatImage`, scaled when batched); set
        #: only by the loader where no user code sees samples before batching (:func:`fused`).
        self.float_images_on_batch = False

    def decode(self, key: str, parts: dict[str, bytes]) -> dict[str, Any]:
        """Decode every part of the sample ``key``; names starting with ``__`` pass through."""
        out: dict[str, Any] = {}
        plain = not self.guess_content
        for name, data in parts.items():
            fn = _DECODERS.get(name)
            if plain and fn in _PLAIN:  # json/txt/cls parts: one call, no wrapping
                try:
                    out[name] = fn(name, data, self)
                    continue
                except Exception:
                    pass  # decoded again below, which reports the failure as every decode does
            out[name] = data if name.startswith("__") else self.decode_part(key, name, data)
        return out

    def plain_decoder(self, name: str) -> PartDecoder | None:
        """The decoder :meth:`decode` calls directly for part ``name`` (json, txt, cls parts;
        no content guessing; ``decode`` not overridden), for callers that decode many samples
        in one loop; None where :meth:`decode` must run. Where it raises, call :meth:`decode`,
        which reports the failure as every decode does.

        Example:
            >>> decoder = SampleDecoder()
            >>> decoder.plain_decoder("json") is not None, decoder.plain_decoder("jpg")
            (True, None)
        """
        if self.guess_content or type(self).decode is not SampleDecoder.decode:
            return None
        fn = _DECODERS.get(name)
        return fn if fn in _PLAIN else None

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        """Energon style: decode a dict with ``__key__`` and parts (bytes values only)."""
        key = str(sample.get("__key__", "?"))
        return {
            name: self.decode_part(key, name, v)
            if isinstance(v, bytes) and not name.startswith("__")
            else v
            for name, v in sample.items()
        }

    def decode_file(self, fname: str, raw: bytes) -> Any:
        """Decode one file by its name (``dir/key.jpg``), as Energon's ``decode(fname, raw)``."""
        key, _, ext = fname.rpartition("/")[2].partition(".")
        value = self.decode_part(key, ext or fname, raw)
        if isinstance(value, CompressedImage):  # one file: decoded on the GPU at once
            return decode_one_on_gpu(value)
        return value

    def decode_part(self, key: str, name: str, data: bytes) -> Any:
        """Decode one part ``name`` (e.g. ``jpg``, ``seg.json.gz``) of sample ``key``."""
        fn = _DECODERS.get(name)
        if fn in _PLAIN and not self.guess_content:  # json/txt/cls parts: one call, no wrapping
            try:
                return fn(name, data, self)
            except Exception:
                pass  # decoded again below, which reports the failure as every decode does
        inner = name
        while inner.lower().endswith(".gz") or inner.lower() == "gz":
            data = _run(key, name, "gz", functools.partial(gzip.decompress, data))
            inner = inner[:-3] if len(inner) > 2 else ""
        ext = inner.rpartition(".")[2].lower()
        if self.guess_content:
            ext = guess_extension(data) or ext
        fn = _DECODERS.get(ext)
        if fn is None:
            return data
        return _run(key, name, ext, lambda: fn(ext, data, self))

    def check_pixels(self, height: int, width: int) -> None:
        """Raise a per-sample error for an image over ``max_image_pixels``."""
        if height * width > self.max_image_pixels:
            raise SampleError(
                f"image of {width}x{height} pixels is over "
                f"max_image_pixels={self.max_image_pixels}.",
                hint="Resize the image in the dataset, or raise max_image_pixels.",
            )

    def config(self) -> dict[str, Any]:
        """The options, for fingerprints of the loader configuration."""
        return {
            "image_decode": self.image_decode,
            "av_decode": self.av_decode,
            "video_decode_audio": self.video_decode_audio,
            "guess_content": self.guess_content,
            "max_image_pixels": self.max_image_pixels,
            "image_min_size": self.image_min_size,
        }

    def cpu_decoder(self) -> SampleDecoder:
        """A copy that decodes images on the CPU (the GPU modes' CPU twin).

        Example:
            >>> SampleDecoder(image_decode="torchrgb8").cpu_decoder().cpu_image_decode
            'torchrgb8'
        """
        cpu = copy.copy(self)
        cpu.gpu_images = False
        cpu.float_images_on_batch = False
        return cpu

    def fused(self) -> SampleDecoder:
        """A copy that leaves images to the batcher: JPEGs as :class:`JpegImage` (decoded
        straight into the batch), other float images as :class:`FloatImage` (scaled there).

        Same batches, less work: only valid where nothing reads the decoded images before
        :func:`stoker.pipeline.batch.batch_pad_stack` (the loader decides; users need not).
        """
        fused = copy.copy(self)
        fused.float_images_on_batch = True
        return fused

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"SampleDecoder({args})"


def _run(key: str, name: str, ext: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (ConfigError, MissingDependencyError):
        raise  # the setup is wrong, not this sample: never skipped
    except SampleError as e:
        raise SampleError(e.problem, key=key, part=name, hint=e.hint) from e
    except Exception as e:
        raise SampleError(
            f"cannot decode the part as {ext!r}: {type(e).__name__}: {e}", key=key, part=name
        ) from e


def _text(ext: str, data: bytes, decoder: SampleDecoder) -> str:
    return data.decode("utf-8")


def _int(ext: str, data: bytes, decoder: SampleDecoder) -> int:
    return int(data)


def _json(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    try:  # the common case (UTF-8, no surrounding space) straight to the scanner
        text = data.decode("utf-8")
        value, end = _scan_json(text, 0)
        if end == len(text):
            return value
    except Exception:
        pass
    return json.loads(data)  # other encodings, whitespace, and the errors as json reports them


_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

#: ``scan(text, 0)``: the first JSON value of ``text`` and where it ends (raises where none
#: starts there): the scanner of :func:`scan_json`, for loops that inline it.
JSON_SCANNER = _scan_json
#: The decoder of JSON parts (what :meth:`SampleDecoder.plain_decoder` gives for ``json``).
JSON_PART: PartDecoder = _json
#: What :func:`scan_json` returns where the JSON part decoder must decide.
NOT_SCANNED: Any = object()


def scan_json(data: bytes) -> Any:
    """``data`` decoded as the JSON part decoder decodes it in its common case (UTF-8, one
    value and nothing around it: a JSONL line), else :data:`NOT_SCANNED` (call the decoder,
    which decodes the rest or reports the error). For loops over many lines: no frame of the
    decoder's, no exception raised.

    Example:
        >>> scan_json(b'{"a": 1}'), scan_json(b'{"a": 1} x') is NOT_SCANNED
        ({'a': 1}, True)
    """
    try:
        text = data.decode("utf-8")
        value, end = _scan_json(text, 0)
    except Exception:
        return NOT_SCANNED
    return value if end == len(text) else NOT_SCANNED


#: Decoders of small text parts, pure functions of their bytes (the fast path of decode_part).
_PLAIN: frozenset[PartDecoder] = frozenset({_text, _int, _json})


def _npy(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
    return dict(loaded) if ext == "npz" else loaded


def _pth(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def _msgpack(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    msgpack = _import("msgpack", "codecs")
    return msgpack.unpackb(data)


def _cbor(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    return _import("cbor2", "codecs").loads(data)


def _pickle(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    from stoker.pipeline.decode_pickle import decode_pickle
    from stoker.storage.options import current

    return decode_pickle(ext, data, trusted=current().trust_pickles)


#: JPEG 2000 files and codestreams, decoded by Pillow where it was built with OpenJPEG.
JPEG2000_EXTENSIONS = ("jp2", "j2k", "jpx", "jpf", "j2c")


@functools.cache
def _pillow_reads_jpeg2000() -> bool:
    features = _import("PIL.features", "image")
    return bool(features.check("jpg_2000"))


def _jpeg2000(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    if not _pillow_reads_jpeg2000():  # the setup, not the sample: never skipped
        raise ConfigError(
            f"decoding JPEG 2000 ({ext!r}) parts needs Pillow built with OpenJPEG, and this "
            "Pillow has no JPEG 2000 support (PIL.features.check('jpg_2000') is False).",
            hint="Install Pillow's wheel from PyPI (it includes OpenJPEG), or build Pillow "
            "with libopenjp2.",
        )
    return decode_image(ext, data, decoder)


def _av(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    from stoker.pipeline.decode_av import decode_av  # PyAV and the media code load on first use

    return decode_av(ext, data, decoder)


def _import(module: str, extra: str) -> Any:
    from stoker.errors import require

    return require(module, f"decoding {extra} parts")


register_decoder("txt text transcript", _text)
register_decoder("cls cls2 index inx id", _int)
register_decoder("json jsn", _json)
register_decoder("npy npz", _npy)
register_decoder("pth", _pth)
register_decoder("msgpack mp msg", _msgpack)
register_decoder("cbor", _cbor)
register_decoder("pickle pyd", _pickle)
register_decoder(IMAGE_EXTENSIONS, decode_image)
register_decoder(JPEG2000_EXTENSIONS, _jpeg2000)
register_decoder(AV_EXTENSIONS, _av)
