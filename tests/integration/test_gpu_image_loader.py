"""GPU image modes through real worker processes: what crosses from the workers, the batches the
main process hands out, and save/restore, checked without a GPU.

The worker side needs no CUDA (it reads headers and keeps the bytes), so it runs here as it does
on a GPU machine; only the last step, nvImageCodec's batched decode, is stood in for by the CPU
decode of the same batch (tests/unit/test_gpu_decode.py checks the GPU's against it on a GPU).
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_savable_loader,
    get_val_dataset,
)
from stoker.media.gpu_images import CompressedImage, CompressedImages
from stoker.media.gpu_support import GpuDecodeFallbackWarning, forget_warnings
from stoker.runtime import gpu_batches
from tests.integration._images import make_noise_jpeg_dataset

SIZES = [(64, 48), (40, 70), (50, 50), (30, 20), (72, 40)]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_noise_jpeg_dataset(tmp_path_factory.mktemp("gpu") / "ds", SIZES, shards=2)


def encoder(mode: str, keep_compressed: bool) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GpuDecodeFallbackWarning)
        decoder = SampleDecoder(image_decode=mode)  # type: ignore[arg-type]
    forget_warnings()
    if keep_compressed:  # as where CUDA and nvImageCodec are there
        decoder.gpu_images = True
    return encoder_of(decoder)


def encoder_of(decoder: SampleDecoder) -> Any:
    class Encoder(DefaultTaskEncoder[Any, Any, Any, Any]):
        pass

    task_encoder = Encoder()
    task_encoder.decoder = decoder
    return task_encoder


def dataset(root: Path, task_encoder: Any, workers: int) -> Any:
    return get_val_dataset(
        str(root),
        split_part="train",
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=3,
        task_encoder=task_encoder,
    )


@pytest.fixture
def cpu_stand_in(monkeypatch: pytest.MonkeyPatch) -> list[CompressedImages]:
    """The main process's GPU decode replaced by the CPU decode of the same batch; records what
    the workers sent."""
    received: list[CompressedImages] = []

    def decode(batch: CompressedImages) -> torch.Tensor:
        received.append(batch)
        return batch.cpu_tensor()

    monkeypatch.setattr(gpu_batches, "decode_on_gpu", decode)
    return received


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(("mode", "cpu_mode"), [("nvimgcodecrgb8", "torchrgb8"),
                                                ("nvimgcodecrgb", "torchrgb")])  # fmt: skip
def test_workers_send_compressed_images_and_batches_equal_cpu_decode(
    root: Path, cpu_stand_in: list[CompressedImages], workers: int, mode: str, cpu_mode: str
) -> None:
    gpu = list(get_loader(dataset(root, encoder(mode, keep_compressed=True), workers)))
    cpu = list(get_loader(dataset(root, encoder(cpu_mode, keep_compressed=False), workers)))
    assert len(cpu_stand_in) == len(gpu) == len(cpu) == 4
    for sent in cpu_stand_in:
        assert all(isinstance(item, CompressedImage) for item in sent.items)
        assert all(item.data.startswith(b"\xff\xd8") for item in sent.items)  # JPEG bytes
    for g, c in zip(gpu, cpu, strict=True):
        assert g.__key__ == c.__key__ and g.caption == c.caption
        assert g.image.dtype == c.image.dtype and torch.equal(g.image, c.image)


@pytest.mark.skipif(
    torch.cuda.is_available() and importlib.util.find_spec("nvidia.nvimgcodec") is not None,
    reason="CUDA and nvImageCodec are here: no fallback",
)
def test_fallback_loader_equals_the_cpu_mode(root: Path) -> None:
    forget_warnings()
    with pytest.warns(GpuDecodeFallbackWarning):
        fallback = encoder_of(SampleDecoder(image_decode="nvimgcodecrgb8"))
    assert not fallback.decoder.gpu_images
    got = list(get_loader(dataset(root, fallback, 2)))
    expected = list(get_loader(dataset(root, encoder("torchrgb8", False), 2)))
    assert [b.__key__ for b in got] == [b.__key__ for b in expected]
    assert all(torch.equal(g.image, e.image) for g, e in zip(got, expected, strict=True))


def test_save_and_restore_are_unaffected(root: Path, cpu_stand_in: list[CompressedImages]) -> None:
    def loader() -> Any:
        return get_savable_loader(dataset(root, encoder("nvimgcodecrgb8", True), 2))

    first = loader()
    it = iter(first)
    next(it)
    state = first.save_state_rank()
    rest = [b for _, b in zip(range(2), it, strict=False)]
    second = loader()
    second.restore_state_rank(state)
    again = [b for _, b in zip(range(2), iter(second), strict=False)]
    assert [b.__key__ for b in again] == [b.__key__ for b in rest]
    assert all(torch.equal(a.image, r.image) for a, r in zip(again, rest, strict=True))
    cpu = get_savable_loader(dataset(root, encoder("torchrgb8", False), 2))
    cpu.restore_state_rank(state)  # a state saved with GPU decode restores on a CPU setup
    on_cpu = [b for _, b in zip(range(2), iter(cpu), strict=False)]
    assert [b.__key__ for b in on_cpu] == [b.__key__ for b in rest]
