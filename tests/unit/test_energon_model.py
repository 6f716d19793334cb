"""The model layer behaves like Energon's: slotted keyword-only dataclasses that client code
subclasses (class shapes as in Megatron-LM's multimodal example and Megatron-Bridge's Qwen-VL
task encoder), ``extend``/``derive_from``/``from_samples``, the grouping and hook wiring rules,
error handlers and ``WorkerConfig``."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import pickle
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from stoker import (
    AugmentTaskEncoder,
    Batch,
    CaptioningSample,
    DefaultTaskEncoder,
    ErrorPolicy,
    Sample,
    SourceInfo,
    StokerError,
    TaskEncoder,
    TextSample,
    WorkerConfig,
    edataclass,
    log_exception,
    reraise_exception,
)
from stoker.model.task import sample_hooks, uses_grouping
from stoker.pipeline import hook_index
from stoker.pipeline.batching import BatchMaker, restore_key_of
from stoker.pipeline.hook_index import BatchSlots, batch_slots
from stoker.pipeline.skip_policy import ErrorTracker

SRC = SourceInfo(dataset_path="/d", index=3, shard_name="s.tar", file_names=("k.txt",))


# --- class shapes of real client code ---------------------------------------------------------


@dataclass
class ImageTaskSample(Sample):  # Megatron-LM examples/multimodal/dataset_helpers.py
    __key__: str
    __restore_key__: tuple[Any, ...]
    __subflavor__: dict[str, Any]
    __subflavors__: dict[str, Any]
    imgs: list[torch.Tensor]
    num_tiles: list[int]
    tokens: torch.Tensor
    total_len: int
    labels: torch.Tensor | None = None


@dataclass
class ImageTaskBatchPacked(Batch):  # Megatron-LM: re-declares metadata without defaults
    __key__: list[str]
    __restore_key__: tuple[Any, ...]
    __subflavor__: dict[str, Any]
    __subflavors__: list[dict[str, Any]]
    tokens: torch.Tensor
    labels: torch.Tensor
    imgs: torch.Tensor
    num_tiles: list[list[int]]
    max_lengths: list[int]
    cu_lengths: list[list[int]]


@dataclass
class QwenVLTaskBatch(Batch):  # Megatron-Bridge models/qwen_vl/data/energon.py
    __keys__: list[str]
    __subflavors__: list[dict[str, Any]]
    input_ids: torch.Tensor
    labels: torch.Tensor
    attention_mask: torch.Tensor | None = None
    total_tokens: int | None = None


@dataclass
class HFEnergonBatch(Batch):  # Megatron-Bridge data/energon/hf_task_encoder.py
    __keys__: list[str] = field(default_factory=list)
    __subflavors__: list[dict[str, Any]] = field(default_factory=list)
    input_ids: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    total_tokens: int | None = None


@dataclass
class ChatMLSample(Sample):  # Megatron-Bridge data/energon/task_encoder_utils.py
    conversation: str
    imgs: list[torch.Tensor] | None = None
    tools: list[dict[str, Any]] | None = None


@edataclass
class ScoredCaption(CaptioningSample):
    score: float


def packed_batch() -> ImageTaskBatchPacked:
    return ImageTaskBatchPacked(
        __key__=["a", "b"],
        __restore_key__=(),
        __subflavor__={},
        __subflavors__=[{"x": 1}, {"x": 2}],
        tokens=torch.arange(6).view(2, 3),
        labels=torch.zeros(2, 4),
        imgs=torch.zeros(3, 3, 4, 4),
        num_tiles=[[1], [2]],
        max_lengths=[3, 3],
        cu_lengths=[[0, 3], [0, 3]],
    )


def test_client_subclasses_redeclare_fields_without_defaults() -> None:
    batch = packed_batch()
    assert batch.__subflavors__ == [{"x": 1}, {"x": 2}] and batch.__sources__ is None
    sample = ImageTaskSample(
        __key__="k", __restore_key__=("W", 1), __subflavor__={}, __subflavors__={},
        imgs=[], num_tiles=[], tokens=torch.ones(2), total_len=2,
    )  # fmt: skip
    assert sample.labels is None and sample.__sources__ is None
    qwen = QwenVLTaskBatch(
        __key__=["a"], __restore_key__=(), __keys__=["a"], __subflavors__=[{}],
        input_ids=torch.ones(1, 2), labels=torch.ones(1, 2),
    )  # fmt: skip
    assert qwen.total_tokens is None
    assert HFEnergonBatch(__key__=[], __restore_key__=()).input_ids.numel() == 0
    chat = ChatMLSample(__key__="c", __restore_key__=(), conversation="[]")
    assert chat.imgs is None


def test_base_classes_are_slotted_and_keyword_only() -> None:
    for cls in (Sample, Batch, CaptioningSample, TextSample, ScoredCaption):
        assert "__slots__" in vars(cls), cls
        assert all(f.kw_only for f in dataclasses.fields(cls)), cls
    with pytest.raises(TypeError):
        TextSample("k", (), text="t")  # type: ignore[misc]
    with pytest.raises(AttributeError):
        TextSample(__key__="k", __restore_key__=(), text="t").other = 1  # type: ignore[attr-defined]


def test_slotted_samples_and_client_batches_pickle() -> None:
    for value in (
        ScoredCaption(__key__="k", __restore_key__=("W", 2), image=torch.ones(1, 2, 2),
                      caption="c", score=0.5, __sources__=(SRC,)),
        packed_batch(),
        ChatMLSample(__key__="c", __restore_key__=(), conversation="[]", imgs=[torch.ones(2)]),
    ):  # fmt: skip
        again = pickle.loads(pickle.dumps(value))
        assert type(again) is type(value)
        for f in dataclasses.fields(value):
            assert same(getattr(again, f.name), getattr(value, f.name)), f.name


def same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning needs an accelerator")
def test_pin_memory_keeps_slotted_types() -> None:
    pinned = packed_batch().pin_memory()
    assert isinstance(pinned, ImageTaskBatchPacked) and pinned.tokens.is_pinned()
    assert pinned.__subflavors__ == [{"x": 1}, {"x": 2}]
    sample = ScoredCaption(__key__="k", __restore_key__=(), image=torch.ones(1), caption="c",
                           score=1.0).pin_memory()  # fmt: skip
    assert sample.image.is_pinned() and sample.score == 1.0


# --- extend / derive_from / from_samples --------------------------------------------------------


def test_extend_copies_every_field_and_adds_new_ones() -> None:
    base = CaptioningSample(__key__="k", __restore_key__=("W", 1), __subflavors__={"a": 1},
                            __sources__=(SRC,), image=torch.ones(1), caption="c")  # fmt: skip
    scored = ScoredCaption.extend(base, score=0.25, caption="new")
    assert (scored.__key__, scored.__restore_key__, scored.__subflavors__, scored.__sources__) == (
        "k", ("W", 1), {"a": 1}, (SRC,),
    )  # fmt: skip
    assert scored.caption == "new" and scored.score == 0.25 and scored.image is base.image
    with pytest.raises(TypeError, match="subclass of ScoredCaption"):
        CaptioningSample.extend(scored)
    with pytest.raises(TypeError, match="score"):
        ScoredCaption.extend(base)  # the new field has no default
    assert Batch.extend(Batch(__key__=["a"], __restore_key__=())).__key__ == ["a"]


def test_batch_derive_from_and_from_samples_follow_energon() -> None:
    samples = [
        ScoredCaption(__key__="a", __restore_key__=("W", 0), __subflavors__={"s": 1},
                      __sources__=(SRC,), image=torch.ones(1, 2), caption="x", score=1.0),
        ScoredCaption(__key__="b", __restore_key__=("W", 1), image=torch.ones(1, 3),
                      caption="y", score=2.0),
    ]  # fmt: skip

    @dataclass
    class Raw(Batch):
        image: torch.Tensor
        caption: list[str]
        score: list[float]

    raw = Raw.from_samples(samples)
    assert raw.__key__ == ["a", "b"] and raw.__restore_key__ == (("W", 0), ("W", 1))
    assert raw.__subflavors__ == [{"s": 1}]  # only the samples that have some (Energon's)
    assert raw.__sources__ == (SRC,) and raw.image.shape == (2, 1, 3)
    bare = [TextSample(__key__=k, __restore_key__=(), text=k) for k in "ab"]

    @dataclass
    class Texts(Batch):
        text: list[str]

    assert Texts.from_samples(bare).__subflavors__ is None  # none set: left at the default
    assert Texts.from_samples(bare).__sources__ is None

    @dataclass
    class Final(Batch):
        n: int

    final = Final.derive_from(raw, n=2)
    assert (final.__key__, final.__subflavors__, final.n) == (["a", "b"], [{"s": 1}], 2)
    with pytest.raises(TypeError, match="__key__"):
        Final.derive_from(raw, n=2, __key__=["z"])


# --- wiring rules ------------------------------------------------------------------------------


class Buckets(DefaultTaskEncoder[Any, Any, Any, Any]):
    def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
        return len(sample.text), 2


class Weighted(AugmentTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: Any) -> Any:
        return ("weighted", super().encode_sample(sample))


def test_overriding_batch_group_criterion_turns_grouping_on() -> None:
    assert uses_grouping(Buckets()) and uses_grouping(Buckets(), None)
    assert not uses_grouping(Buckets(), False) and uses_grouping(TaskEncoder(), True)
    assert not uses_grouping(TaskEncoder()) and not uses_grouping(DefaultTaskEncoder())
    on_instance = DefaultTaskEncoder()
    on_instance.batch_group_criterion = lambda s: (0, 1)  # type: ignore[method-assign]
    assert uses_grouping(on_instance)
    # As in Energon, an AugmentTaskEncoder forwards encode_sample/batch/encode_batch only.
    assert not uses_grouping(Weighted(Buckets()))
    assert TaskEncoder().batch_group_criterion("s") == (None, None)


def test_sample_hooks_follow_energons_rules() -> None:
    class Pre(TaskEncoder[Any, Any, Any, Any]):
        def preencode_sample(self, sample: Any) -> Any:
            return sample

    class PrePost(Pre):
        def postencode_sample(self, sample: Any) -> Any:
            return sample

    class Both(PrePost):
        def encode_sample(self, sample: Any) -> Any:
            return sample

    assert sample_hooks(DefaultTaskEncoder(), packing=False) == ["encode_sample"]
    assert sample_hooks(Pre(), packing=True) == ["preencode_sample"]
    assert sample_hooks(PrePost(), packing=False) == ["preencode_sample", "postencode_sample"]
    assert sample_hooks(PrePost(), packing=True) == ["preencode_sample"]
    assert sample_hooks(Both(), packing=True) == ["encode_sample", "preencode_sample"]


def test_augment_task_encoder_forwards_to_the_wrapped_encoder() -> None:
    inner = DefaultTaskEncoder[Any, Any, Any, Any]()
    inner.decoder = None
    outer = Weighted(inner)
    assert outer.decoder is None and outer.cookers == ()
    sample = TextSample(__key__="k", __restore_key__=(), text="t")
    assert outer.encode_sample(sample) == ("weighted", sample)
    batch = outer.batch([sample, sample])
    assert isinstance(batch, TextSample) and batch.text == ["t", "t"]  # type: ignore[comparison-overlap]
    assert outer.encode_batch(batch) is batch


def test_batch_and_sample_indices_outside_and_inside_hooks() -> None:
    with pytest.raises(StokerError, match="only set while a loader calls"):
        _ = TaskEncoder().current_batch_index
    # Energon's numbering: batch t of a rank comes from stream t mod L.
    slots = batch_slots([10, 11], stream=11, t=0)
    assert [slots.batch_index(), slots.sample_index(0), slots.sample_index(5)] == [1, 1, 11]
    slots.made = 3
    assert slots.batch_index() == 7
    assert batch_slots([10, 11], stream=10, t=7).first == 8  # after a restore at batch 7
    seen: list[tuple[int, int]] = []

    class Indices(TaskEncoder[Any, Any, Any, Any]):
        def batch(self, samples: list[Any]) -> Any:
            seen.append((self.current_batch_index, self.current_sample_index))
            return {"__restore_key__": None, "n": len(samples)}

    maker = BatchMaker(Indices(), BatchSlots(first=1, step=2), ErrorTracker())
    first = maker.make([{"__restore_key__": ("W", 4)}, {"x": 1}])
    maker.make([{"__restore_key__": ("W", 5)}])
    assert seen == [(1, 1), (3, 3)] and maker.slots.made == 2
    assert first["__restore_key__"] == ("BatchDataset", 1, ("W", 4), None)
    assert restore_key_of(first) == ("BatchDataset", 1, ("W", 4), None)
    assert not hook_index.active()


# --- error handlers and WorkerConfig ----------------------------------------------------------


def test_error_handlers_map_onto_the_policy(caplog: pytest.LogCaptureFixture) -> None:
    assert ErrorPolicy.from_handler(log_exception) == ErrorPolicy()
    assert ErrorPolicy.from_handler(reraise_exception).mode == "raise"
    calls: list[tuple[str, Any, Any]] = []
    custom = ErrorPolicy.from_handler(lambda e, s, src: calls.append((type(e).__name__, s, src)))
    sample = TextSample(__key__="bad", __restore_key__=(), text="", __sources__=(SRC,))
    tracker = ErrorTracker(custom)
    with caplog.at_level(logging.WARNING, logger="stoker"):
        tracker.failed(ValueError("boom"), sample, "encode_sample")
    assert calls == [("ValueError", sample, [SRC])]
    assert tracker.skipped == {"encode_sample: ValueError": 1}
    with pytest.raises(ValueError, match="boom") as raised:
        ErrorTracker(ErrorPolicy.from_handler(reraise_exception)).failed(
            ValueError("boom"), sample, "encode_sample"
        )
    assert any("'bad'" in note for note in getattr(raised.value, "__notes__", ["'bad'"]))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stoker"):
        log_exception(KeyError("k"), sample, [SRC])
    assert "'bad'" in caplog.text and "s.tar[3]" in caplog.text


def test_worker_config_as_energons() -> None:
    wc = WorkerConfig(rank=1, world_size=2, num_workers=3, global_error_handler=reraise_exception)
    assert wc.config() == {"rank": 1, "world_size": 2, "num_workers": 3,
                           "data_parallel_group": None}  # fmt: skip
    assert wc == WorkerConfig(rank=1, world_size=2, num_workers=3, seed_offset=5)
    assert wc != WorkerConfig(rank=0, world_size=2, num_workers=3)
    assert hash(wc) == hash(WorkerConfig(rank=1, world_size=2, num_workers=3))
    assert WorkerConfig(rank=0, world_size=1, num_workers=0).global_error_handler is log_exception
    again = pickle.loads(pickle.dumps(wc))
    assert again.global_error_handler is reraise_exception and again.num_workers == 3
    assert wc.global_worker_id() == 3 and wc.global_worker_id(2) == 5
    expected = int.from_bytes(hashlib.sha1(b"3,0").digest(), "big") & 0xFFFFFFFF
    assert wc.worker_seed() == expected
    assert wc.should_log(0) and not wc.should_log(1) and wc.global_rank() == 1


def test_float_images_stay_tensors_for_pre_and_postencode_hooks() -> None:
    from stoker.runtime.float_batches import fuses_float_images

    class Post(DefaultTaskEncoder[Any, Any, Any, Any]):
        def postencode_sample(self, sample: Any) -> Any:
            return sample

    assert fuses_float_images(DefaultTaskEncoder(), 4, packing=False, grouping=False)
    assert not fuses_float_images(Post(), 4, packing=False, grouping=False)


def test_bugs_are_not_skipped_as_bad_samples() -> None:
    calls: list[Exception] = []
    tracker = ErrorTracker(ErrorPolicy.from_handler(lambda e, s, src: calls.append(e)))
    sample = TextSample(__key__="k", __restore_key__=(), text="t")
    with pytest.raises(StokerError, match="NameError") as raised:
        tracker.failed(NameError("name 'x' is not defined"), sample, "encode_sample")
    assert isinstance(raised.value.__cause__, NameError) and calls == []
    tracker.failed(ValueError("bad"), sample, "encode_sample")
    assert len(calls) == 1 and tracker.skipped == {"encode_sample: ValueError": 1}
