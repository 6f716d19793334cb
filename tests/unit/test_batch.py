"""Batching: stack, pad-stack, list, generic batching of samples, dicts and named tuples."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pytest
import torch

from stoker.errors import StokerError
from stoker.pipeline.batch import (
    batch_list,
    batch_pad_stack,
    batch_samples,
    batch_stack,
    generic_batch,
)
from stoker.samples import CaptioningSample, SourceInfo


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
    from stoker.samples import CrudeSample

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
