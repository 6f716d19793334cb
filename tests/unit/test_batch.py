"""Batching: stack, pad-stack, list, generic batching of samples, dicts and named tuples."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest
import torch

from stoker.errors import StokerError
from stoker.media.image import FloatImage, JpegImage
from stoker.model.samples import CaptioningSample, SourceInfo
from stoker.pipeline.batch import (
    batch_list,
    batch_pad_stack,
    batch_samples,
    batch_stack,
    generic_batch,
)


def caption(i: int, h: int, w: int) -> CaptioningSample:
    src = SourceInfo(dataset_path="/d", index=i, shard_name="s.tar", file_names=(f"{i}.jpg",))
    return CaptioningSample(
        __key__=f"k{i}",
        __restore_key__=("Webdataset", i),
        __subflavors__={"src": i},
        __sources__=(src,),
        image=torch.full((3, h, w), i + 1, dtype=torch.uint8),
        caption=f"c{i}",
    )


def test_batch_stack_and_list() -> None:
    out = batch_stack([torch.zeros(2, 3), torch.ones(2, 3)])
    assert out.shape == (2, 2, 3) and out[1].sum() == 6
    values = ["a", 1]
    assert batch_list(values) is values


def test_pad_stack_pads_with_zero_and_keeps_dtype() -> None:
    out = batch_pad_stack(
        [torch.ones(2, 1, dtype=torch.uint8), torch.ones(1, 3, dtype=torch.uint8)]
    )
    assert out.dtype == torch.uint8 and out.shape == (2, 2, 3)
    assert out[0].tolist() == [[1, 0, 0], [1, 0, 0]] and out[1].tolist() == [[1, 1, 1], [0, 0, 0]]
    with pytest.raises(StokerError, match="numbers of dims"):
        batch_pad_stack([torch.ones(2), torch.ones(2, 2)])


def test_generic_batch_of_captioning_samples() -> None:
    batch = generic_batch([caption(0, 4, 5), caption(1, 6, 3)])
    assert isinstance(batch, CaptioningSample)
    assert batch.image.shape == (2, 3, 6, 5) and batch.image.dtype == torch.uint8
    assert batch.image[0, :, :4, :5].eq(1).all() and batch.image[0, :, 4:].eq(0).all()
    assert batch.image[1, :, :, :3].eq(2).all() and batch.image[1, :, :, 3:].eq(0).all()
    assert batch.caption == ["c0", "c1"]
    assert batch.__key__ == ["k0", "k1"]  # type: ignore[comparison-overlap]
    assert batch.__restore_key__ == [("Webdataset", 0), ("Webdataset", 1)]  # type: ignore[comparison-overlap]
    assert batch.__subflavors__ == [{"src": 0}, {"src": 1}]  # type: ignore[comparison-overlap]


def test_generic_batch_recurses_dicts_and_named_tuples() -> None:
    class Pair(NamedTuple):
        x: torch.Tensor
        label: int

    out = generic_batch(
        [{"p": Pair(torch.zeros(1), 1), "n": 1.5}, {"p": Pair(torch.ones(2), 2), "n": 2.5}]
    )
    assert isinstance(out["p"], Pair) and out["p"].x.tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert out["p"].label == [1, 2] and out["n"] == [1.5, 2.5]  # numbers stay lists (Energon)


def test_dataclass_with_from_samples_builds_itself() -> None:
    @dataclasses.dataclass
    class Custom:
        v: int

        @classmethod
        def from_samples(cls, samples: list[Any]) -> str:
            return f"{len(samples)} samples"

    assert generic_batch([Custom(1), Custom(2)]) == "2 samples"


def test_batch_samples_with_actions_and_result_type() -> None:
    @dataclasses.dataclass
    class Out:
        image: Any
        caption: Any
        __key__: Any
        __restore_key__: Any
        __subflavors__: Any
        __sources__: Any

    out = batch_samples([caption(0, 2, 2), caption(1, 2, 2)], Out, actions={"caption": "|".join})
    assert isinstance(out, Out) and out.caption == "c0|c1" and out.image.shape == (2, 3, 2, 2)
    as_dict = batch_samples([caption(0, 2, 2)], dict)
    assert isinstance(as_dict, dict) and as_dict["caption"] == ["c0"]
    with pytest.raises(StokerError, match="empty"):
        batch_samples([])
    with pytest.raises(StokerError, match="field by field"):
        batch_samples([1, 2])


def test_crude_dicts_keep_their_type_and_subflavors_per_sample() -> None:
    from stoker.model.samples import CrudeSample

    crude = [CrudeSample(txt=f"t{i}", __subflavors__={"a": i}) for i in range(2)]
    out = generic_batch(crude)
    assert isinstance(out, CrudeSample)
    assert out == {"txt": ["t0", "t1"], "__subflavors__": [{"a": 0}, {"a": 1}]}
    assert generic_batch([torch.ones(1), torch.ones(2)]).shape == (2, 2)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.bfloat16])
def test_pad_stack_strided_views_and_padding(dtype: torch.dtype) -> None:
    hwc = [torch.arange(h * w * 3).reshape(h, w, 3).to(dtype) for h, w in [(2, 3), (4, 1)]]
    chw = [t.permute(2, 0, 1) for t in hwc]  # what image decoding returns: non-contiguous views
    out = batch_pad_stack(chw)
    assert out.shape == (2, 3, 4, 3) and out.dtype == dtype
    for i, t in enumerate(chw):
        assert torch.equal(out[i, :, : t.shape[1], : t.shape[2]], t)
    assert out[0, :, 2:, :].abs().sum() == 0 and out[1, :, :, 1:].abs().sum() == 0


def _random_images(sizes: list[tuple[int, int]]) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    hwc = [
        torch.randint(0, 256, (h, w, 3), generator=generator, dtype=torch.uint8) for h, w in sizes
    ]
    return [t.permute(2, 0, 1) for t in hwc]  # CHW views, as image decoding returns them


def test_float_images_batch_exactly_like_float_tensors() -> None:
    pixels = _random_images([(5, 7), (9, 3), (2, 2)])
    images = [FloatImage(p) for p in pixels]
    fused = generic_batch(images)
    expected = batch_pad_stack([image.tensor() for image in images])
    assert fused.dtype == torch.float32 and fused.shape == (3, 3, 9, 7)
    assert torch.equal(fused, expected)
    assert torch.equal(images[0].tensor(), pixels[0].float() / 255)
    assert fused[2, :, 2:, :].abs().sum() == 0 and fused[1, :, :, 3:].abs().sum() == 0


class _PadStacks(torch.utils.data.IterableDataset[tuple[Any, Any]]):
    """Pad-stacks in a dataloader worker, where batches are built in shared memory."""

    def __iter__(self) -> Any:
        for n in range(1, 4):
            pixels = _random_images([(n, 4), (4, n + 1)])
            yield batch_pad_stack(pixels), batch_pad_stack([FloatImage(p) for p in pixels])


def test_pad_stack_in_a_worker_is_shared_and_zero_padded() -> None:
    loader = torch.utils.data.DataLoader(_PadStacks(), batch_size=None, num_workers=1)
    got = list(loader)
    assert len(got) == 3
    for n, (ints, floats) in enumerate(got, start=1):
        pixels = _random_images([(n, 4), (4, n + 1)])
        assert torch.equal(ints, batch_pad_stack(pixels))
        assert torch.equal(floats, ints.float() / 255)
        assert ints[0, :, n:, :].sum() == 0 and ints[1, :, :, n + 1 :].sum() == 0


@pytest.mark.parametrize(
    ("mode", "ext"), [("torchrgb", "jpg"), ("torchl", "png"), ("torchrgba", "png")]
)
def test_fused_decoder_batches_like_the_float_decoder(mode: Any, ext: str) -> None:
    import io

    from PIL import Image

    from stoker.pipeline.decode import SampleDecoder

    def encoded(pixels: torch.Tensor) -> bytes:
        out = io.BytesIO()
        Image.fromarray(pixels.permute(1, 2, 0).numpy()).save(
            out, format=ext.replace("jpg", "jpeg")
        )
        return out.getvalue()

    files = [encoded(p) for p in _random_images([(6, 9), (11, 4)])]
    plain, fused = SampleDecoder(image_decode=mode), SampleDecoder(image_decode=mode).fused()
    deferred = [fused.decode_part("k", ext, data) for data in files]
    # JPEGs stay bytes until the batch decodes them into place; other formats are deferred floats
    assert all(isinstance(image, (FloatImage, JpegImage)) for image in deferred)
    assert not plain.float_images_on_batch
    expected = generic_batch([plain.decode_part("k", ext, data) for data in files])
    assert expected.dtype == torch.float32
    assert torch.equal(generic_batch(deferred), expected)


def test_float_images_fuse_only_where_no_user_code_sees_samples() -> None:
    from stoker.model.task import DefaultTaskEncoder
    from stoker.runtime.float_batches import fuses_float_images

    class DecoderOnly(DefaultTaskEncoder[Any, Any, Any, Any]):
        decoder = None

    class Encodes(DefaultTaskEncoder[Any, Any, Any, Any]):
        def encode_sample(self, sample: Any) -> Any:
            return sample

    patched = DefaultTaskEncoder[Any, Any, Any, Any]()
    patched.batch = lambda samples: samples  # type: ignore[method-assign]
    assert fuses_float_images(DefaultTaskEncoder(), 32, packing=False, grouping=False)
    assert fuses_float_images(DecoderOnly(), 32, packing=False, grouping=False)
    assert not fuses_float_images(Encodes(), 32, packing=False, grouping=False)
    assert not fuses_float_images(patched, 32, packing=False, grouping=False)
    assert not fuses_float_images(DefaultTaskEncoder(), None, packing=False, grouping=False)
    assert not fuses_float_images(DefaultTaskEncoder(), 32, packing=True, grouping=False)
    assert not fuses_float_images(DefaultTaskEncoder(), 32, packing=False, grouping=True)


def test_float_images_mixed_with_float_tensors_batch_alike() -> None:
    pixels = _random_images([(3, 4), (5, 2)])
    images = [FloatImage(p) for p in pixels]
    expected = batch_pad_stack([image.tensor() for image in images])
    assert torch.equal(batch_pad_stack([images[0].tensor(), images[1]]), expected)
    assert torch.equal(batch_pad_stack([images[0], images[1].tensor()]), expected)
