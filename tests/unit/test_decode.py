"""SampleDecoder: every extension and image mode, gz, codecs, errors and bounds."""

from __future__ import annotations

import gzip
import io
import json
import pickle
from collections.abc import Iterator
from typing import Any

import cbor2
import msgpack
import numpy as np
import pytest
import torch
from PIL import Image

from stoker.errors import ConfigError, SampleError
from stoker.pipeline import decode as decode_module
from stoker.pipeline.decode import SampleDecoder, guess_extension, register_decoder

RED, BLUE = (255, 0, 0), (0, 0, 255)


def image_bytes(fmt: str, mode: str = "RGB", size: tuple[int, int] = (8, 6), **kw: Any) -> bytes:
    """An image whose left half is red and right half blue (in ``mode``)."""
    img = Image.new("RGB", size, RED)
    img.paste(Image.new("RGB", (size[0] // 2, size[1]), BLUE), (size[0] // 2, 0))
    buf = io.BytesIO()
    img.convert(mode).save(buf, format=fmt, **kw)
    return buf.getvalue()


LOSSLESS = {"png": "PNG", "bmp": "BMP", "tif": "TIFF", "tiff": "TIFF", "ppm": "PPM", "webp": "WEBP"}


@pytest.mark.parametrize("ext", sorted(LOSSLESS))
def test_lossless_images_default_torchrgb(ext: str) -> None:
    kw = {"lossless": True} if ext == "webp" else {}
    out = SampleDecoder().decode("k", {ext: image_bytes(LOSSLESS[ext], **kw)})[ext]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.shape == (3, 6, 8) and out.is_contiguous()
    assert out[:, 0, 0].tolist() == [1.0, 0.0, 0.0] and out[:, 5, 7].tolist() == [0.0, 0.0, 1.0]


def test_gif_and_grey_formats() -> None:
    decoder = SampleDecoder(image_decode="torchrgb8")
    gif = decoder.decode_part("k", "gif", image_bytes("GIF"))
    assert gif.shape == (3, 6, 8) and gif[:, 0, 0].tolist() == list(RED)
    for ext, fmt in (("pgm", "PPM"), ("pbm", "PPM"), ("pnm", "PPM")):
        mode = "1" if ext == "pbm" else "L"
        out = decoder.decode_part("k", ext, image_bytes(fmt, mode))
        assert out.shape == (3, 6, 8) and bool((out[0] == out[1]).all()), ext


MODES = {
    "torchrgb": (torch.Tensor, torch.float32, (3, 6, 8)),
    "torch": (torch.Tensor, torch.float32, (3, 6, 8)),
    "torchrgb8": (torch.Tensor, torch.uint8, (3, 6, 8)),
    "torch8": (torch.Tensor, torch.uint8, (3, 6, 8)),
    "torchuint8": (torch.Tensor, torch.uint8, (3, 6, 8)),
    "torchrgba8": (torch.Tensor, torch.uint8, (4, 6, 8)),
    "torchl8": (torch.Tensor, torch.uint8, (6, 8)),
    "torchl": (torch.Tensor, torch.float32, (6, 8)),
    "rgb8": (np.ndarray, np.uint8, (6, 8, 3)),
    "numpy": (np.ndarray, np.uint8, (6, 8, 3)),
    "rgb": (np.ndarray, np.float32, (6, 8, 3)),
    "l8": (np.ndarray, np.uint8, (6, 8)),
    "rgba8": (np.ndarray, np.uint8, (6, 8, 4)),
}


@pytest.mark.parametrize("ext", ["png", "jpg"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_image_modes(mode: str, ext: str) -> None:
    data = image_bytes("PNG" if ext == "png" else "JPEG", quality=95)
    out = SampleDecoder(image_decode=mode).decode_part("k", ext, data)  # type: ignore[arg-type]
    kind, dtype, shape = MODES[mode]
    assert isinstance(out, kind) and out.dtype == dtype and tuple(out.shape) == shape
    hi = 255 if dtype in (np.uint8, torch.uint8) else 1.0
    assert float(out.min()) >= 0 and float(out.max()) <= hi
    if len(shape) == 3:  # left pixel is red, right pixel is blue (JPEG: approximately)
        px = out[:3, 0, 0] if kind is torch.Tensor else out[0, 0, :3]
        right = out[:3, 5, 7] if kind is torch.Tensor else out[5, 7, :3]
        expect_red, expect_blue = np.array(RED) / 255 * hi, np.array(BLUE) / 255 * hi
        tolerance = 0 if ext == "png" else 0.1 * hi
        assert np.abs(np.asarray(px, dtype=float) - expect_red).max() <= tolerance
        assert np.abs(np.asarray(right, dtype=float) - expect_blue).max() <= tolerance


@pytest.mark.parametrize("mode", ["pil", "pilrgb", "pill", "pilrgba"])
def test_pil_modes(mode: str) -> None:
    out = SampleDecoder(image_decode=mode).decode_part("k", "png", image_bytes("PNG"))  # type: ignore[arg-type]
    assert isinstance(out, Image.Image) and out.size == (8, 6)
    assert out.mode == {"pil": "RGB", "pilrgb": "RGB", "pill": "L", "pilrgba": "RGBA"}[mode]


def pillow_rgb(data: bytes) -> np.ndarray[Any, Any]:
    return np.array(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize(
    ("mode", "kw"),
    [("RGB", {}), ("RGB", {"progressive": True}), ("L", {}), ("CMYK", {})],
)
def test_jpeg_variants_match_pillow(mode: str, kw: dict[str, Any]) -> None:
    data = image_bytes("JPEG", mode, size=(64, 48), quality=90, **kw)
    out = SampleDecoder(image_decode="torchrgb8").decode_part("k", "JPG", data)
    assert out.dtype == torch.uint8 and out.shape == (3, 48, 64)
    assert np.array_equal(out.permute(1, 2, 0).numpy(), pillow_rgb(data))


def test_jpeg_min_size_decodes_smaller_but_not_below() -> None:
    data = image_bytes("JPEG", size=(256, 128))
    for mode in ("torchrgb8", "pil"):
        out = SampleDecoder(image_decode=mode, image_min_size=(60, 100)).decode_part(  # type: ignore[arg-type]
            "k", "jpg", data
        )
        h, w = (out.shape[1], out.shape[2]) if mode != "pil" else (out.height, out.width)
        assert 60 <= h < 128 and 100 <= w < 256, mode


def test_max_image_pixels_is_a_per_sample_error() -> None:
    decoder = SampleDecoder(max_image_pixels=47)
    for ext, fmt in (("jpg", "JPEG"), ("png", "PNG")):
        with pytest.raises(SampleError) as info:
            decoder.decode("s42", {f"img.{ext}": image_bytes(fmt)})
        assert "s42" in str(info.value) and f"img.{ext}" in str(info.value)
        assert "8x6" in str(info.value)
    assert (
        SampleDecoder(max_image_pixels=48).decode_part("k", "png", image_bytes("PNG")) is not None
    )


def test_corrupt_image_error_names_key_and_part() -> None:
    with pytest.raises(SampleError) as info:
        SampleDecoder().decode("bad01", {"jpg": b"\xff\xd8\xff not really a jpeg"})
    assert info.value.key == "bad01" and info.value.part == "jpg"
    assert "'bad01'" in str(info.value) and "'jpg'" in str(info.value)


def test_basic_types() -> None:
    parts = {
        "txt": "héllo".encode(),
        "text": b"t",
        "cls": b" 7\n",
        "cls2": b"3",
        "index": b"12",
        "id": b"5",
        "json": b'{"a": [1, 2]}',
        "foo.bar": b"\x00raw",
        "pickle": pickle.dumps({"x": 1}),
    }
    out = SampleDecoder().decode("k", parts)
    assert out["txt"] == "héllo" and out["text"] == "t"
    assert (out["cls"], out["cls2"], out["index"], out["id"]) == (7, 3, 12, 5)
    assert out["json"] == {"a": [1, 2]}
    assert out["foo.bar"] == b"\x00raw"
    assert out["pickle"] == {"x": 1}  # plain data (see test_decode_pickle.py)


def test_codec_round_trips() -> None:
    arr = np.arange(6, dtype=np.int16).reshape(2, 3)
    npy, npz, pth = io.BytesIO(), io.BytesIO(), io.BytesIO()
    np.save(npy, arr)
    np.savez(npz, a=arr, b=arr * 2)
    torch.save({"t": torch.arange(3)}, pth)
    value = {"a": [1, "x", 2.5]}
    out = SampleDecoder().decode(
        "k",
        {
            "npy": npy.getvalue(),
            "npz": npz.getvalue(),
            "pth": pth.getvalue(),
            "msgpack": msgpack.packb(value),
            "mp": msgpack.packb(value),
            "cbor": cbor2.dumps(value),
        },
    )
    assert np.array_equal(out["npy"], arr) and out["npy"].dtype == np.int16
    assert set(out["npz"]) == {"a", "b"} and np.array_equal(out["npz"]["b"], arr * 2)
    assert torch.equal(out["pth"]["t"], torch.arange(3))
    assert out["msgpack"] == value and out["mp"] == value and out["cbor"] == value


def test_npy_with_objects_is_refused() -> None:
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(SampleError, match="npy"):
        SampleDecoder().decode("k", {"npy": buf.getvalue()})


def test_gz_parts_decode_by_inner_extension() -> None:
    out = SampleDecoder(image_decode="torchrgb8").decode(
        "k",
        {
            "json.gz": gzip.compress(b'{"a": 1}'),
            "seg.png.gz": gzip.compress(image_bytes("PNG")),
            "bin.gz": gzip.compress(b"xyz"),
        },
    )
    assert out["json.gz"] == {"a": 1}
    assert out["seg.png.gz"].shape == (3, 6, 8)
    assert out["bin.gz"] == b"xyz"
    with pytest.raises(SampleError, match="'gz'"):
        SampleDecoder().decode("k", {"txt.gz": b"not gzip"})


def test_meta_keys_pass_through_and_energon_call_style() -> None:
    decoder = SampleDecoder()
    assert decoder.decode("k", {"__key__": b"k", "txt": b"a"}) == {"__key__": b"k", "txt": "a"}
    assert decoder({"__key__": "k", "txt": b"a", "n": 3}) == {"__key__": "k", "txt": "a", "n": 3}
    assert decoder.decode_file("dir/sample.json", b"[1]") == [1]


@pytest.mark.parametrize("ext", ["mp4", "wav", "flac", "mkv", "webm", "mp3"])
def test_av_parts_become_lazy_decoders(ext: str) -> None:
    from stoker.media.av_decoder import AVDecoder

    decoded = SampleDecoder().decode_part("k", ext, b"\x00\x01")
    assert isinstance(decoded, AVDecoder)  # nothing decoded yet: bad bytes fail on first use


@pytest.fixture
def restore_registry() -> Iterator[None]:
    saved = dict(decode_module._DECODERS)
    yield
    decode_module._DECODERS.clear()
    decode_module._DECODERS.update(saved)


@pytest.mark.usefixtures("restore_registry")
def test_register_decoder_hook() -> None:
    seen: list[tuple[str, bool]] = []

    def fake_av(ext: str, data: bytes, decoder: SampleDecoder) -> str:
        seen.append((ext, decoder.video_decode_audio))
        return f"video:{len(data)}"

    register_decoder("mp4 .MOV", fake_av)
    decoder = SampleDecoder(video_decode_audio=True)
    assert decoder.decode("k", {"mp4": b"abc", "clip.mov": b"ab"}) == {
        "mp4": "video:3",
        "clip.mov": "video:2",
    }
    assert seen == [("mp4", True), ("mov", True)]


def test_guess_content() -> None:
    png = image_bytes("PNG")
    assert guess_extension(png) == "png" and guess_extension(b"plain") is None
    out = SampleDecoder(guess_content=True, image_decode="torchrgb8").decode_part("k", "bin", png)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 6, 8)
    assert SampleDecoder().decode_part("k", "bin", png) == png


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="torchrgb8"):
        SampleDecoder(image_decode="nope")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="AVDecoder"):
        SampleDecoder(av_decode="nope")  # type: ignore[arg-type]


def test_config_lists_options() -> None:
    cfg = SampleDecoder(image_decode="torchrgb8").config()
    assert cfg["image_decode"] == "torchrgb8" and cfg["max_image_pixels"] == 2**28
    assert json.loads(json.dumps(cfg)) == cfg


def test_rgb_jpeg_uses_libjpeg_turbo_and_cmyk_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import simplejpeg

    calls: list[int] = []
    real = simplejpeg.decode_jpeg

    def counting(data: bytes, **kw: Any) -> Any:
        calls.append(len(data))
        return real(data, **kw)

    monkeypatch.setattr(simplejpeg, "decode_jpeg", counting)
    decoder = SampleDecoder(image_decode="torchrgb8")
    decoder.decode_part("k", "jpg", image_bytes("JPEG"))
    assert len(calls) == 1
    decoder.decode_part("k", "jpg", image_bytes("JPEG", "CMYK"))
    assert len(calls) == 1  # CMYK went to Pillow


@pytest.mark.parametrize("mode", ["torchrgb", "torchrgb8", "torchl8", "rgb8", "rgb", "l"])
@pytest.mark.parametrize("ext", ["jpg", "png"])
def test_same_values_as_energon(mode: str, ext: str) -> None:
    pytest.importorskip("megatron.energon")
    from megatron.energon import SampleDecoder as EnergonDecoder

    data = image_bytes("JPEG" if ext == "jpg" else "PNG", size=(33, 17), quality=85)
    theirs = EnergonDecoder(image_decode=mode).decode(f"s.{ext}", data)
    ours = SampleDecoder(image_decode=mode).decode_part("s", ext, data)  # type: ignore[arg-type]
    assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
    assert np.array_equal(np.asarray(ours), np.asarray(theirs))


@pytest.mark.parametrize(
    ("ext", "fmt"), [("jp2", "JPEG2000"), ("j2k", "JPEG2000"), ("jpx", "JPEG2000")]
)
def test_jpeg2000_parts_decode_like_other_images(ext: str, fmt: str) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (6, 8, 3), dtype=np.uint8)
    buf = io.BytesIO()
    # Pillow writes a .j2k codestream or a .jp2 file by the name's extension; lossless.
    Image.fromarray(pixels).save(buf, format=fmt, **({"no_jp2": True} if ext == "j2k" else {}))
    data = buf.getvalue()
    assert guess_extension(data) == ("j2k" if ext == "j2k" else "jp2")
    tensor = SampleDecoder(image_decode="torchrgb8").decode("k", {ext: data})[ext]
    assert tensor.dtype == torch.uint8 and tuple(tensor.shape) == (3, 6, 8)
    assert np.array_equal(tensor.permute(1, 2, 0).numpy(), pixels)
    image = SampleDecoder(image_decode="pil").decode("k", {f"page.{ext}": data})[f"page.{ext}"]
    assert isinstance(image, Image.Image) and image.size == (8, 6)
    with pytest.raises(SampleError, match=f"part '{ext}'"):
        SampleDecoder().decode("k", {ext: data[: len(data) // 3]})


def test_jpeg2000_without_openjpeg_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode_module, "_pillow_reads_jpeg2000", lambda: False)
    with pytest.raises(ConfigError, match="OpenJPEG"):
        SampleDecoder().decode("k", {"jp2": b"\x00\x00\x00\x0cjP  \r\n\x87\n"})
