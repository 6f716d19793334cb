"""GPU decoding: the CPU fallback and its one warning, what workers send for the GPU (compressed
images, batched per field), and, where CUDA and the packages are there, the GPU results.

Tests that need CUDA skip with their reason; they run on a GPU machine through
``benchmarks/gpu_check.sh``.
"""

from __future__ import annotations

import importlib.util
import io
import pickle
import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from PIL import Image

from stoker.errors import ConfigError, MissingDependencyError, SampleError
from stoker.media.av_decoder import AVDecoder
from stoker.media.gpu_image_decoder import NVImageCodecDecoder, decode_on_gpu
from stoker.media.gpu_images import CompressedImage, CompressedImages
from stoker.media.gpu_support import GpuDecodeFallbackWarning, forget_warnings, gpu_problem
from stoker.media.image_modes import GPU_IMAGE_MODES
from stoker.model.samples import CaptioningSample
from stoker.pipeline.batch import batch_pad_stack, generic_batch
from stoker.pipeline.decode import SampleDecoder
from stoker.runtime import gpu_batches

CUDA = torch.cuda.is_available()
NVIMGCODEC = (
    CUDA
    and importlib.util.find_spec("nvidia") is not None
    and (importlib.util.find_spec("nvidia.nvimgcodec") is not None)
)
NVVIDEO = CUDA and importlib.util.find_spec("PyNvVideoCodec") is not None
needs_nvimgcodec = pytest.mark.skipif(
    not NVIMGCODEC, reason="needs CUDA and nvidia-nvimgcodec (pip install 'stoker[gpu]')"
)
needs_nvdec = pytest.mark.skipif(
    not NVVIDEO, reason="needs CUDA and PyNvVideoCodec (pip install 'stoker[gpu]')"
)
cpu_only = pytest.mark.skipif(NVIMGCODEC, reason="tests the fallback where GPU decoding is missing")


@pytest.fixture(autouse=True)
def fresh_warnings() -> Iterator[None]:
    forget_warnings()
    yield
    forget_warnings()


def image(size: tuple[int, int], fmt: str = "JPEG", mode: str = "RGB", seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], len(mode)), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels.squeeze(-1) if mode == "L" else pixels, mode).save(out, format=fmt)
    return out.getvalue()


def textured_video(codec: str, frames: int, size: tuple[int, int]) -> bytes:
    """A lossy h264 video made with PyAV (skips where PyAV is missing: the GPU machine's
    image-decoding run carries no PyAV)."""
    pytest.importorskip("av")
    from tests.integration._media import make_textured_video

    return make_textured_video(codec, frames=frames, size=size)


def gpu_kept(mode: str) -> SampleDecoder:
    """A decoder of GPU mode ``mode`` keeping images compressed, as where CUDA is there (the
    worker side needs no CUDA: it only reads headers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuDecodeFallbackWarning)
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
    decoder.gpu_images = True
    return decoder


def test_the_fallback_decision_names_its_reason() -> None:
    assert gpu_problem(cuda=False, package="json", extra="gpu", device=0) == (
        "CUDA is not available (torch.cuda.is_available() is False)"
    )
    missing = gpu_problem(cuda=True, package="nvidia.no_such_codec", extra="gpu", device=0)
    assert missing is not None and "stoker[gpu]" in missing
    assert gpu_problem(cuda=True, package="json", extra="gpu", device=-1) is not None
    assert gpu_problem(cuda=True, package="json", extra="gpu", device=0) is None


@cpu_only
@pytest.mark.parametrize("mode", sorted(GPU_IMAGE_MODES))
def test_fallback_warns_once_and_decodes_as_the_cpu_mode(mode: str) -> None:
    parts = {"jpg": image((20, 14)), "png": image((9, 7), "PNG", "RGBA"), "txt": b"hi"}
    with pytest.warns(GpuDecodeFallbackWarning, match="decoded on the CPU") as caught:
        decoders = [SampleDecoder(image_decode=mode) for _ in range(3)]  # type: ignore[arg-type]
    assert len(caught) == 1  # one warning per process, not per decoder or sample
    assert caught[0].filename == __file__  # it points at the user's line
    cpu = SampleDecoder(image_decode=GPU_IMAGE_MODES[mode])  # type: ignore[arg-type]
    expected = cpu.decode("k", parts)
    for decoder in decoders:
        assert not decoder.gpu_images
        got = decoder.decode("k", parts)
        for name in ("jpg", "png"):
            assert isinstance(got[name], torch.Tensor)
            assert got[name].dtype == expected[name].dtype
            assert torch.equal(got[name], expected[name])
        assert got["txt"] == "hi"
    assert decoders[0].config()["image_decode"] == mode  # states save the mode asked for


def test_the_gpu_extra_stays_out_of_all() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any("nvimgcodec" in r for r in extras["gpu"])
    assert any("PyNvVideoCodec" in r for r in extras["gpu"])
    assert "gpu" not in extras["all"][0] and not any("nvidia" in r for r in extras["all"])


def test_unknown_mode_lists_the_gpu_modes_too() -> None:
    with pytest.raises(ConfigError, match="nvimgcodecrgb8"):
        SampleDecoder(image_decode="nvimgcodec_rgb")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "dims"), [("nvimgcodecrgb8", (3,)), ("nvimgcodecl", ()), ("nvimgcodecrgba8", (4,))]
)
def test_workers_keep_images_compressed_with_their_shape(mode: str, dims: tuple[int, ...]) -> None:
    decoder = gpu_kept(mode)
    data = image((33, 21))
    got = decoder.decode("k", {"jpg": data, "gif": image((5, 4), "GIF", "L")})
    kept = got["jpg"]
    assert isinstance(kept, CompressedImage)
    assert kept.data is data and kept.ext == "jpg"
    assert tuple(kept.shape) == (*dims, 21, 33)  # the CPU twin's layout
    assert tuple(kept.tensor().shape) == tuple(kept.shape)
    assert isinstance(got["gif"], torch.Tensor)  # not nvImageCodec's: decoded by the worker
    cpu = SampleDecoder(image_decode=GPU_IMAGE_MODES[mode])  # type: ignore[arg-type]
    assert torch.equal(kept.tensor(), cpu.decode_part("k", "jpg", data))
    assert pickle.loads(pickle.dumps(kept)).data == data


def test_bad_images_fail_in_the_worker_under_the_error_policy() -> None:
    decoder = gpu_kept("nvimgcodecrgb8")
    for bad in (b"\xff\xd8\xff\xe0 not a jpeg", image((30, 20))[:200], b"not a png"):
        with pytest.raises(SampleError, match="sample 'k7'"):
            decoder.decode_part("k7", "png" if bad.startswith(b"not") else "jpg", bad)
    small = gpu_kept("nvimgcodecrgb8")
    small.max_image_pixels = 100
    with pytest.raises(SampleError, match="max_image_pixels"):
        small.decode_part("k", "png", image((11, 10), "PNG"))


def test_batches_gather_compressed_images_per_field() -> None:
    decoder = gpu_kept("nvimgcodecrgb8")
    datas = [image((30, 20), seed=1), image((12, 25), seed=2)]
    samples = [
        CaptioningSample(
            __key__=f"k{i}",
            __restore_key__=(),
            __subflavors__=None,
            __sources__=None,
            image=decoder.decode_part(f"k{i}", "jpg", d),
            caption=f"c{i}",
        )
        for i, d in enumerate(datas)
    ]
    batch = generic_batch(samples)
    assert isinstance(batch, CaptioningSample)
    images = batch.image
    assert isinstance(images, CompressedImages)
    assert [i.data for i in images.items] == datas
    assert (images.mode, images.device) == ("nvimgcodecrgb8", 0)
    assert batch.caption == ["c0", "c1"]
    cpu = SampleDecoder(image_decode="torchrgb8")
    expected = batch_pad_stack([cpu.decode_part("k", "jpg", d) for d in datas])
    assert torch.equal(images.cpu_tensor(), expected)
    again = pickle.loads(pickle.dumps(images))  # what crosses from a worker
    assert torch.equal(again.cpu_tensor(), expected)


def test_the_main_process_hook_finds_images_in_any_container(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoder = gpu_kept("nvimgcodecrgb8")
    kept = CompressedImages([decoder.decode_part("k", "jpg", image((8, 6)))], "nvimgcodecrgb8", 0)
    seen: list[CompressedImages] = []

    def decode(batch: CompressedImages) -> torch.Tensor:
        seen.append(batch)
        return batch.cpu_tensor()

    monkeypatch.setattr(gpu_batches, "decode_on_gpu", decode)
    batch = {"a": kept, "b": [1, (kept, "x")], "c": "text"}
    out = gpu_batches.finish_gpu_images(batch)
    assert out["a"].shape == (1, 3, 6, 8) and out["b"][1][0].shape == (1, 3, 6, 8)
    assert out["b"][0] == 1 and out["b"][1][1] == "x" and out["c"] == "text"
    assert len(seen) == 2
    plain = {"txt": ["a"]}
    assert gpu_batches.finish_gpu_images(plain) == plain


@pytest.mark.skipif(NVVIDEO, reason="tests the fallback where GPU video decoding is missing")
def test_video_on_a_missing_gpu_decodes_on_the_cpu_with_one_warning() -> None:
    video = textured_video("h264", frames=24, size=(96, 64))
    cpu = AVDecoder(video).get_video_clips([(0, 5), (10, 20)], video_unit="frames")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gpu = AVDecoder(video, device=0)
        first = gpu.get_video_clips([(0, 5), (10, 20)], video_unit="frames")
        again = SampleDecoder(video_decode_device=0).decode_part("k", "mp4", video)
        data = again.get_clips(video_clip_ranges=[(0, 5)], video_unit="frames")
    fallbacks = [w for w in caught if issubclass(w.category, GpuDecodeFallbackWarning)]
    assert len(fallbacks) == 1 and "video is decoded on the CPU" in str(fallbacks[0].message)
    assert first[1] == cpu[1]
    for a, b in zip(first[0], cpu[0], strict=True):
        assert a.device.type == "cpu" and torch.equal(a, b)
    assert torch.equal(data.video_clips[0], cpu[0][0])
    assert pickle.loads(pickle.dumps(gpu)).device == 0


@pytest.mark.skipif(
    importlib.util.find_spec("nvidia") is not None
    and importlib.util.find_spec("nvidia.nvimgcodec") is not None,
    reason="nvImageCodec is installed",
)
def test_energons_per_image_decoder_names_the_extra_where_the_package_is_missing() -> None:
    with pytest.raises(MissingDependencyError, match=r"stoker\[gpu\]"):
        NVImageCodecDecoder("nvimgcodecrgb8")
    with pytest.raises(ConfigError, match="color_space"):
        NVImageCodecDecoder("nvimgcodec_rgb")


# --- on a GPU machine -----------------------------------------------------------------------


def _levels(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a.cpu().int() - b.cpu().int()).abs().max())


@needs_nvimgcodec
@pytest.mark.parametrize("mode", ["nvimgcodecrgb8", "nvimgcodecrgb", "nvimgcodecl8"])
def test_gpu_batches_equal_cpu_decode_within_two_levels(mode: str) -> None:
    decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
    assert decoder.gpu_images
    datas = [image((64, 48), seed=1), image((40, 70), "PNG", seed=2), image((50, 50), seed=3)]
    kept = batch_pad_stack([decoder.decode_part("k", "jpg", d) for d in datas[:1]] + [
        decoder.decode_part("k", "png", datas[1]), decoder.decode_part("k", "jpg", datas[2])
    ])  # fmt: skip
    out = decode_on_gpu(kept)
    assert out.device.type == "cuda"
    expected = kept.cpu_tensor()
    assert out.shape == expected.shape and out.dtype == expected.dtype
    if out.dtype == torch.uint8:
        assert _levels(out, expected) <= 2
    else:
        assert float((out.cpu() - expected).abs().max()) <= 2 / 255 + 1e-6


@needs_nvimgcodec
def test_gpu_modes_force_channels() -> None:
    grey, rgba = image((20, 10), "PNG", "L"), image((20, 10), "PNG", "RGBA")
    for mode, dims in [("nvimgcodecrgb8", (3,)), ("nvimgcodecl8", ()), ("nvimgcodecrgba8", (4,))]:
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
        batch = batch_pad_stack([decoder.decode_part("k", "png", d) for d in (grey, rgba)])
        assert decode_on_gpu(batch).shape == (2, *dims, 10, 20)  # as the CPU twin's batch
        assert decode_on_gpu(batch).shape == batch.cpu_tensor().shape


@needs_nvimgcodec
def test_energons_per_image_decoder_and_decode_file_give_cuda_tensors() -> None:
    png = image((30, 20), "PNG")
    decoder = NVImageCodecDecoder()
    assert decoder("pdf", b"") is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert decoder("png", b"") is None
    tensor = decoder("png", png)
    assert tensor is not None and tensor.device.type == "cuda" and tensor.dtype == torch.float32
    cpu = SampleDecoder(image_decode="torchrgb").decode_part("k", "png", png)
    assert tensor.shape == cpu.shape and float((tensor.cpu() - cpu).abs().max()) <= 2 / 255
    single = SampleDecoder(image_decode="nvimgcodecrgb8").decode_file("k.png", png)
    assert single.device.type == "cuda" and single.dtype == torch.uint8
    assert _levels(single, SampleDecoder(image_decode="torchrgb8").decode_file("k.png", png)) <= 2


@needs_nvdec
def test_gpu_video_clips_match_the_cpu_within_a_few_levels() -> None:
    video = textured_video("h264", frames=48, size=(256, 192))
    ranges = [(0, 7), (20, 31)]
    cpu_clips, cpu_times = AVDecoder(video).get_video_clips(ranges, video_unit="frames")
    with warnings.catch_warnings():
        warnings.simplefilter("error", GpuDecodeFallbackWarning)  # no silent fallback
        gpu_clips, gpu_times = AVDecoder(video, device=0).get_video_clips(
            ranges, video_unit="frames"
        )
    assert gpu_times == cpu_times
    for g, c in zip(gpu_clips, cpu_clips, strict=True):
        assert g.device.type == "cuda" and g.shape == c.shape and g.dtype == torch.uint8
        mean = float((g.cpu().float() - c.float()).abs().mean())
        assert mean < 3.0, f"mean difference {mean:.2f} levels"
