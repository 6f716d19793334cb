"""Energon's model-layer behaviour through real loaders (0 and 2 worker processes): grouping
turned on by overriding ``batch_group_criterion``, ``current_batch_index`` /
``current_sample_index`` (also after a restore), ``__restore_key__`` on batches of a custom
``batch()``, Megatron-LM's ``Batch`` subclass, ``global_error_handler`` and
``AugmentTaskEncoder``."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    AugmentTaskEncoder,
    Batch,
    CaptioningSample,
    DefaultTaskEncoder,
    Sample,
    TaskEncoder,
    WorkerConfig,
    edataclass,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
    reraise_exception,
    stateless,
)
from tests.integration._images import make_image_dataset

#: 3 train shards: 40 samples.
SPLITS = {"train": {"train_a": 16, "train_b": 16, "train_c": 8}}
TRAIN: dict[str, Any] = {"shuffle_buffer_size": 20, "max_samples_per_sequence": 10}


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("energon_model") / "ds"
    make_image_dataset(root, SPLITS)
    return root


def config(num_workers: int, **options: Any) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=num_workers, **options)


@edataclass
class IndexedCaption(CaptioningSample):
    batch_index: int
    sample_index: int
    rand_num: int


class Indexed(TaskEncoder[Any, Any, Any, Any]):
    """Records the hook indices the loader set, and a seeded random number."""

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: CaptioningSample) -> IndexedCaption:
        return IndexedCaption.extend(
            sample,
            batch_index=self.current_batch_index,
            sample_index=self.current_sample_index,
            rand_num=random.randint(0, 1000),
        )


def indexed_loader(root: Path, workers: int) -> Any:
    dataset = get_train_dataset(
        str(root), batch_size=2, task_encoder=Indexed(), worker_config=config(workers), **TRAIN
    )
    return get_savable_loader(dataset)


@pytest.mark.parametrize("workers", [0, 2])
def test_current_batch_and_sample_index_as_energon(images: Path, workers: int) -> None:
    loader = indexed_loader(images, workers)
    batches = [batch for _, batch in zip(range(10), loader, strict=False)]
    assert [b.batch_index for b in batches] == [[t, t] for t in range(10)]
    streams = max(workers, 1)  # Energon: calls * num_workers + worker, unique on the rank
    expected = [
        [(2 * (t // streams) + i) * streams + t % streams for i in range(2)] for t in range(10)
    ]
    assert [b.sample_index for b in batches] == expected
    state = loader.save_state_rank()
    after = [batch for _, batch in zip(range(6), loader, strict=False)]
    resumed = indexed_loader(images, workers)
    resumed.restore_state_rank(state)
    again = [batch for _, batch in zip(range(6), resumed, strict=False)]
    assert [b.batch_index for b in again] == [[t, t] for t in range(10, 16)]
    for name in ("sample_index", "rand_num", "__key__", "__restore_key__"):
        assert [getattr(b, name) for b in again] == [getattr(b, name) for b in after], name


class TwoEach(TaskEncoder[Any, Any, Any, Any]):
    """A generator hook: two outputs per sample, made as they are batched."""

    def encode_sample(self, sample: CaptioningSample) -> Iterator[IndexedCaption]:
        for _ in range(2):
            yield IndexedCaption.extend(
                sample,
                batch_index=self.current_batch_index,
                sample_index=self.current_sample_index,
                rand_num=0,
            )


@pytest.mark.parametrize("workers", [0, 2])
def test_generator_outputs_see_the_batch_they_go_to(images: Path, workers: int) -> None:
    dataset = get_train_dataset(
        str(images), batch_size=3, task_encoder=TwoEach(), worker_config=config(workers), **TRAIN
    )
    batches = [batch for _, batch in zip(range(8), get_loader(dataset), strict=False)]
    streams = max(workers, 1)
    assert [b.batch_index for b in batches] == [[t] * 3 for t in range(8)]
    # Both outputs of one call share its index: output o of a stream is call o // 2.
    expected = [
        [((3 * (t // streams) + i) // 2) * streams + t % streams for i in range(3)]
        for t in range(8)
    ]
    assert [b.sample_index for b in batches] == expected


class Buckets(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Groups by the parity of the sample's number: even in 3s, odd in 2s."""

    def batch_group_criterion(self, sample: CaptioningSample) -> tuple[Hashable, int | None]:
        odd = int(sample.__key__[-2:]) % 2
        return odd, 2 if odd else 3


@pytest.mark.parametrize("workers", [0, 2])
def test_overriding_batch_group_criterion_groups(images: Path, workers: int) -> None:
    dataset = get_train_dataset(
        str(images), batch_size=4, task_encoder=Buckets(), worker_config=config(workers), **TRAIN
    )
    batches = [batch for _, batch in zip(range(12), get_loader(dataset), strict=False)]
    for batch in batches:
        parities = {int(key[-2:]) % 2 for key in batch.__key__}
        assert len(parities) == 1
        assert len(batch.__key__) == (2 if parities == {1} else 3)
    off = get_train_dataset(
        str(images), batch_size=4, task_encoder=Buckets(), worker_config=config(workers),
        group_batches=False, **TRAIN,
    )  # fmt: skip
    assert {len(b.__key__) for _, b in zip(range(4), get_loader(off), strict=False)} == {4}


@dataclass
class ImageTaskBatchPacked(Batch):  # the shape of Megatron-LM's multimodal batch
    __key__: list[str]
    __restore_key__: tuple[Any, ...]
    __subflavor__: dict[str, Any]
    __subflavors__: list[dict[str, Any]]
    imgs: torch.Tensor
    captions: list[str]


class MegatronStyle(DefaultTaskEncoder[Any, Any, Any, Any]):
    """A custom ``batch`` building the Batch subclass with an empty restore key (as clients do)."""

    def batch(self, samples: list[CaptioningSample]) -> ImageTaskBatchPacked:
        return ImageTaskBatchPacked(
            __key__=[s.__key__ for s in samples],
            __restore_key__=(),
            __subflavor__={},
            __subflavors__=[s.__subflavors__ or {} for s in samples],
            imgs=torch.stack([s.image for s in samples]),
            captions=[s.caption for s in samples],
        )


class DictBatches(DefaultTaskEncoder[Any, Any, Any, Any]):
    def batch(self, samples: list[CaptioningSample]) -> dict[str, Any]:
        return {"__restore_key__": None, "keys": [s.__key__ for s in samples]}


@pytest.mark.parametrize("workers", [0, 2])
def test_custom_batches_get_energons_restore_key(images: Path, workers: int) -> None:
    def loader(encoder: Any) -> Any:
        return get_savable_loader(get_train_dataset(
            str(images), batch_size=3, task_encoder=encoder, worker_config=config(workers), **TRAIN
        ))  # fmt: skip

    packed = loader(MegatronStyle())
    batches = [batch for _, batch in zip(range(4), packed, strict=False)]
    for t, batch in enumerate(batches):
        assert isinstance(batch, ImageTaskBatchPacked) and batch.imgs.shape[0] == 3
        assert batch.__restore_key__[:2] == ("BatchDataset", t)
        sample_keys = batch.__restore_key__[2:]
        assert len(sample_keys) == 3 and all(k[0] == "Webdataset" for k in sample_keys)
    state = packed.save_state_rank()
    after = [b.__restore_key__ for _, b in zip(range(3), packed, strict=False)]
    resumed = loader(MegatronStyle())
    resumed.restore_state_rank(state)
    assert [b.__restore_key__ for _, b in zip(range(3), resumed, strict=False)] == after
    dicts = [b for _, b in zip(range(2), loader(DictBatches()), strict=False)]
    assert [d["__restore_key__"][:2] for d in dicts] == [("BatchDataset", 0), ("BatchDataset", 1)]


class ShouldRaise(Exception):
    """Raised by a test error handler (module level: it crosses process boundaries)."""


class FailsOnSome(DefaultTaskEncoder[Any, Any, Any, Any]):
    @stateless
    def encode_sample(self, sample: CaptioningSample) -> CaptioningSample:
        if sample.__key__.endswith("_03"):
            raise ValueError(f"bad sample {sample.__key__}")
        return sample


def stop_handler(e: Exception, sample: Any, sources: Any) -> None:
    raise ShouldRaise(str(e)) from e


def failing(images: Path, worker_config: WorkerConfig) -> Any:
    return get_val_dataset(
        str(images), split_part="train", batch_size=5, task_encoder=FailsOnSome(),
        worker_config=worker_config,
    )  # fmt: skip


def test_global_error_handler_is_called_and_may_stop(images: Path) -> None:
    calls: list[tuple[type[Exception], str, int]] = []
    handler_config = config(0, global_error_handler=lambda e, s, src: calls.append(
        (type(e), s.__key__, len(src or []))
    ))  # fmt: skip
    keys = [key for batch in get_loader(failing(images, handler_config)) for key in batch.__key__]
    assert sorted(calls) == [(ValueError, f"{s}_03", 1) for s in ("train_a", "train_b", "train_c")]
    assert len(keys) == 37 and not any(k.endswith("_03") for k in keys)
    with pytest.raises(ShouldRaise, match="bad sample"):  # raised in a worker process
        list(get_loader(failing(images, config(1, global_error_handler=stop_handler))))
    with pytest.raises(ValueError, match="bad sample"):
        list(get_loader(failing(images, config(0, global_error_handler=reraise_exception))))


@edataclass
class WeightedCaption(CaptioningSample):
    weight: float


class WeightAugment(AugmentTaskEncoder[Any, Any, Any, Any]):
    """Energon's documented use: wrap a task encoder and change one hook."""

    def __init__(self, task_encoder: TaskEncoder[Any, Any, Any, Any], weight: float) -> None:
        super().__init__(task_encoder)
        self.weight = weight

    def encode_sample(self, sample: Any) -> WeightedCaption:
        sample = super().encode_sample(sample)
        return WeightedCaption(**{f.name: getattr(sample, f.name) for f in
                                  dataclasses.fields(sample)}, weight=self.weight)  # fmt: skip


class PrePost(TaskEncoder[Any, Any, Any, Any]):
    """preencode/postencode without packing run one after the other, as in Energon."""

    def preencode_sample(self, sample: CaptioningSample) -> CaptioningSample:
        return CaptioningSample.derive_from(sample, image=sample.image, caption="pre")

    def postencode_sample(self, sample: CaptioningSample) -> CaptioningSample:
        return CaptioningSample.derive_from(
            sample, image=sample.image, caption=sample.caption + "+post"
        )


@pytest.mark.parametrize("workers", [0, 2])
def test_augment_and_pre_post_encoders_in_workers(images: Path, workers: int) -> None:
    augmented = get_val_dataset(str(images), split_part="train", batch_size=10,
                                worker_config=config(workers),
                                task_encoder=WeightAugment(DefaultTaskEncoder(), 0.8))  # fmt: skip
    batches = list(get_loader(augmented))
    assert sum(len(b.__key__) for b in batches) == 40
    assert all(isinstance(b, WeightedCaption) and b.weight == [0.8] * len(b.__key__)
               for b in batches)  # fmt: skip
    prepost = get_val_dataset(str(images), split_part="train", batch_size=10,
                              worker_config=config(workers), task_encoder=PrePost())  # fmt: skip
    captions = {c for b in get_loader(prepost) for c in b.caption}
    assert captions == {"pre+post"}


@dataclass
class ImageTaskSamplePacked(Sample):  # the shape of Megatron-LM's packed sample
    __key__: str
    __restore_key__: tuple[Any, ...]
    __subflavor__: dict[str, Any]
    __subflavors__: dict[str, Any]
    imgs: list[torch.Tensor]
    captions: list[str]


class MegatronPacking(MegatronStyle):
    """Megatron-LM's packing pattern: greedy groups, a packed Sample subclass, dict batches."""

    def select_samples_to_pack(self, samples: list[CaptioningSample]) -> list[list[Any]]:
        return [samples[i : i + 3] for i in range(0, len(samples), 3)]

    @stateless
    def pack_selected_samples(self, samples: list[CaptioningSample]) -> ImageTaskSamplePacked:
        return ImageTaskSamplePacked(
            __key__=",".join(s.__key__ for s in samples),
            __restore_key__=(),
            __subflavor__={},
            __subflavors__=samples[0].__subflavors__ or {},
            imgs=[s.image for s in samples],
            captions=[s.caption for s in samples],
        )

    def batch(self, samples: list[Any]) -> ImageTaskBatchPacked:
        return ImageTaskBatchPacked(
            __key__=[s.__key__ for s in samples],
            __restore_key__=(),
            __subflavor__={},
            __subflavors__=[s.__subflavors__ for s in samples],
            imgs=torch.stack([torch.stack(s.imgs) for s in samples]),
            captions=[c for s in samples for c in s.captions],
        )

    def encode_batch(self, batch: ImageTaskBatchPacked) -> dict[str, Any]:
        raw = dataclasses.asdict(batch)
        del raw["__subflavors__"]
        return raw


@pytest.mark.parametrize("workers", [0, 2])
def test_megatron_packing_pattern_keys_and_resume(images: Path, workers: int) -> None:
    def loader() -> Any:
        return get_savable_loader(get_train_dataset(
            str(images), batch_size=2, packing_buffer_size=6, task_encoder=MegatronPacking(),
            worker_config=config(workers), **TRAIN,
        ))  # fmt: skip

    first = loader()
    batches = [batch for _, batch in zip(range(3), first, strict=False)]
    for t, batch in enumerate(batches):
        assert isinstance(batch, dict) and batch["imgs"].shape[:2] == (2, 3)
        key = batch["__restore_key__"]
        assert key[:2] == ("BatchDataset", t) and len(key) == 4
        for pack_key, names in zip(key[2:], batch["__key__"], strict=True):
            assert pack_key[:2] == ("PackingDataset", 0) and len(pack_key) == 5
            assert [k[0] for k in pack_key[2:]] == ["Webdataset"] * 3
            assert len(names.split(",")) == 3
    state = first.save_state_rank()
    after = [batch for _, batch in zip(range(3), first, strict=False)]
    resumed = loader()
    resumed.restore_state_rank(state)
    again = [batch for _, batch in zip(range(3), resumed, strict=False)]
    assert [b["__restore_key__"] for b in again] == [b["__restore_key__"] for b in after]
    assert all(torch.equal(a["imgs"], b["imgs"]) for a, b in zip(again, after, strict=True))
