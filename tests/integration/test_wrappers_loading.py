"""Energon's dataset wrappers end to end: real worker processes over prepared datasets.

Scenarios after the shapes of Energon's own dataset tests (captioning samples mapped and batched,
blends of differently batched datasets, a limited repeating validation set, lengths), plus each
wrapper's effect on indexed JSONL datasets whose samples carry their ids.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    BasicDataLoader,
    BatchDataset,
    BlendDataset,
    CaptioningSample,
    ConcatDataset,
    EpochizeDataset,
    FilterDataset,
    GcDataset,
    GroupBatchDataset,
    IterMapDataset,
    LimitDataset,
    LogSampleDataset,
    MapDataset,
    MixBatchDataset,
    PackingDataset,
    RepeatDataset,
    SavableDataLoader,
    ShuffleBufferDataset,
    SkipSample,
    WatchdogDataset,
    WorkerConfig,
    generic_batch,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
)
from stoker.errors import ConfigError
from tests.integration._images import caption_of, make_image_dataset
from tests.integration.test_mix_batch import write_ids

#: Samples of the JSONL datasets "a" (ids 0..39) and "b" (ids 1000..1029).
A, B = 40, 30


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wrappers")
    return {"a": write_ids(root / "a.jsonl", 0, A), "b": write_ids(root / "b.jsonl", 1000, B)}


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wrappers_images") / "ds"
    make_image_dataset(root, {"train": {"train_a": 9, "train_b": 8}})
    return root


def wc(workers: int = 2) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


def id_of(sample: Any) -> int:
    return int(sample["json"]["id"])


def val_ids(path: Path, config: WorkerConfig) -> MapDataset:
    """One ordered pass of unbatched samples, mapped to their ids."""
    val = get_val_dataset(str(path), split_part="train", batch_size=None, worker_config=config)
    return MapDataset(val, id_of, worker_config=config)


def train_ids(path: Path, config: WorkerConfig, **options: Any) -> MapDataset:
    train = get_train_dataset(str(path), batch_size=None, worker_config=config,
                              shuffle_buffer_size=None, max_samples_per_sequence=None,
                              **options)  # fmt: skip
    return MapDataset(train, id_of, worker_config=config)


def as_text(sample: CaptioningSample) -> CaptioningSample:
    """The caption as a uint8 tensor (so batches stack it)."""
    data = torch.frombuffer(bytearray(sample.caption.encode()), dtype=torch.uint8)
    return CaptioningSample(__key__=sample.__key__, __restore_key__=sample.__restore_key__,
                            __subflavors__=sample.__subflavors__, image=sample.image,
                            caption=data)  # fmt: skip


def test_captioning_samples_mapped_then_batched(images: Path) -> None:
    config = wc(2)
    val = get_val_dataset(str(images), split_part="train", batch_size=None, worker_config=config)
    mapped = MapDataset(val, as_text, worker_config=config)
    assert len(mapped) == 17
    first, second = list(get_loader(mapped)), list(get_loader(mapped))
    assert [s.__key__ for s in first] == [s.__key__ for s in second]
    assert sorted(s.__key__ for s in first) == sorted(
        [f"train_a_{i:02d}" for i in range(9)] + [f"train_b_{i:02d}" for i in range(8)]
    )
    batched = BatchDataset(mapped, batch_size=4, batcher=generic_batch, worker_config=config)
    assert len(batched) == len(list(get_loader(batched)))
    seen = []
    for batch in get_loader(batched):
        size = batch.image.shape[0]
        assert 1 <= size <= 4 and batch.image.shape[1:] == (3, 12, 16)
        for key, text in zip(batch.__key__, batch.caption, strict=True):
            assert bytes(text.tolist()).rstrip(b"\0").decode() == caption_of(key)
            seen.append(key)
    assert sorted(seen) == sorted(s.__key__ for s in first)


def test_batch_sizes_in_one_process(images: Path) -> None:
    config = wc(0)
    val = get_val_dataset(str(images), split_part="train", batch_size=None, worker_config=config)
    mapped = MapDataset(val, as_text, worker_config=config)
    big = BatchDataset(mapped, batch_size=100, batcher=generic_batch, worker_config=config)
    assert [b.image.shape[0] for b in get_loader(big)] == [17]
    nine = BatchDataset(mapped, batch_size=9, batcher=generic_batch, worker_config=config)
    assert [b.image.shape[0] for b in get_loader(nine)] == [9, 8]
    dropped = BatchDataset(mapped, 5, generic_batch, drop_last=True, worker_config=config)
    assert [b.image.shape[0] for b in get_loader(dropped)] == [5, 5, 5]
    assert len(dropped) == 3


def test_blend_follows_weights(ids: dict[str, Path]) -> None:
    config = wc(2)
    blend = BlendDataset((train_ids(ids["a"], config), 2), (train_ids(ids["b"], config), 8),
                         worker_config=config)  # fmt: skip
    picked = list(itertools.islice(get_loader(blend), 1000))
    from_a = sum(i < 1000 for i in picked)
    assert 150 <= from_a <= 250


def test_blend_of_batched_datasets(ids: dict[str, Path]) -> None:
    config = wc(2)
    small = BatchDataset(train_ids(ids["a"], config), 2, list, worker_config=config)
    large = BatchDataset(train_ids(ids["b"], config), 3, list, worker_config=config)
    sizes = Counter(len(b) for b in itertools.islice(get_loader(
        BlendDataset((small, 1), (large, 3), worker_config=config)), 400))  # fmt: skip
    assert set(sizes) == {2, 3} and 60 <= sizes[2] <= 140


def test_limited_repeated_validation_gives_the_same_items_each_pass(ids: dict[str, Path]) -> None:
    config = wc(2)
    limited = LimitDataset(RepeatDataset(val_ids(ids["a"], config), worker_config=config),
                           length=50, worker_config=config, reset_after_epoch=True)  # fmt: skip
    loader = get_loader(limited)
    passes = [list(loader) for _ in range(3)]
    assert len(passes[0]) == 50 and passes[0] == passes[1] == passes[2]
    counts = Counter(passes[0])
    assert set(counts) == set(range(A)) and sorted(set(counts.values())) == [1, 2]
    short = LimitDataset(val_ids(ids["a"], config), 7, worker_config=config)
    assert len(short) == 7 and len(list(get_loader(short))) == 7


def test_finite_repeat(ids: dict[str, Path]) -> None:
    config = wc(2)
    twice = RepeatDataset(val_ids(ids["a"], config), repeats=2, worker_config=config)
    assert len(twice) == 2 * A
    assert Counter(get_loader(twice)) == Counter(dict.fromkeys(range(A), 2))
    half = RepeatDataset(val_ids(ids["a"], config), repeats=1.5, worker_config=config)
    assert len(list(get_loader(half))) == len(half) == 60


def test_epochize_continues_where_it_stopped(ids: dict[str, Path]) -> None:
    config = wc(2)
    epochs = EpochizeDataset(RepeatDataset(val_ids(ids["a"], config), worker_config=config), 15,
                             worker_config=config)  # fmt: skip
    loader = get_loader(epochs)
    assert len(loader) == 15
    first, second, third = list(loader), list(loader), list(loader)
    assert len(first) == len(second) == 15
    assert sorted(first + second + third[:10]) == list(range(A))


def test_concat_reads_one_dataset_then_the_other(ids: dict[str, Path]) -> None:
    config = wc(0)
    both = ConcatDataset(val_ids(ids["a"], config), val_ids(ids["b"], config),
                         worker_config=config)  # fmt: skip
    assert len(both) == A + B
    assert list(get_loader(both)) == list(range(A)) + list(range(1000, 1000 + B))
    config = wc(2)
    both = ConcatDataset(val_ids(ids["a"], config), val_ids(ids["b"], config),
                         worker_config=config)  # fmt: skip
    assert sorted(get_loader(both)) == list(range(A)) + list(range(1000, 1000 + B))


def test_filter_and_map_generators_and_skips(ids: dict[str, Path]) -> None:
    config = wc(2)
    even = FilterDataset(val_ids(ids["a"], config), filter_fn=lambda i: i % 2 == 0,
                         worker_config=config)  # fmt: skip
    assert sorted(get_loader(even)) == list(range(0, A, 2))

    def twice_unless_five(i: int) -> Any:
        if i % 5 == 0:
            raise SkipSample()
        yield i
        yield -i

    mapped = MapDataset(val_ids(ids["a"], config), twice_unless_five, worker_config=config)
    expected = [v for i in range(A) if i % 5 for v in (i, -i)]
    assert sorted(get_loader(mapped)) == sorted(expected)


def test_failing_map_is_skipped_and_counted_in_a_row(ids: dict[str, Path]) -> None:
    config = wc(0)

    def fails_on_odd(i: int) -> int:
        if i % 2:
            raise ValueError(f"odd {i}")
        return i

    mapped = MapDataset(val_ids(ids["a"], config), fails_on_odd, worker_config=config)
    assert list(get_loader(mapped)) == list(range(0, A, 2))
    always = MapDataset(val_ids(ids["a"], config), lambda i: 1 // 0, failure_tolerance=3,
                        worker_config=config)  # fmt: skip
    with pytest.raises(Exception, match="3 samples failed in a row"):
        list(get_loader(always))


def test_shuffle_buffer_permutes_each_stream(ids: dict[str, Path]) -> None:
    config = wc(2)
    plain = list(get_loader(val_ids(ids["a"], config)))
    shuffled = list(get_loader(ShuffleBufferDataset(val_ids(ids["a"], config), 6,
                                                    worker_config=config)))  # fmt: skip
    assert sorted(shuffled) == sorted(plain) and shuffled != plain


def test_group_batches_by_key(ids: dict[str, Path]) -> None:
    config = wc(2)
    grouped = GroupBatchDataset(val_ids(ids["a"], config), None, lambda i: (i % 3, 2 + i % 3),
                                batcher=list, worker_config=config)  # fmt: skip
    batches = list(get_loader(grouped))
    assert sorted(i for b in batches for i in b) == list(range(A))
    assert all(len({i % 3 for i in b}) == 1 for b in batches)
    assert all(len(b) == 2 + b[0] % 3 for b in batches[:4])
    with pytest.raises(ConfigError, match="exactly one of them"):
        list(get_loader(GroupBatchDataset(val_ids(ids["a"], config), 4, lambda i: (0, 2),
                                          batcher=list, worker_config=config)))  # fmt: skip


def test_packing_and_iter_map(ids: dict[str, Path]) -> None:
    config = wc(2)
    packed = PackingDataset(val_ids(ids["a"], config), 6, pre_packer=lambda xs: [xs[:2], xs[2:]],
                            final_packer=tuple, worker_config=config)  # fmt: skip
    packs = list(get_loader(packed))
    assert sorted(i for p in packs for i in p) == list(range(A))
    assert {len(p) for p in packs[:4]} == {2, 4}

    def pairs(items: Any) -> Any:
        for x, y in zip(items, items, strict=False):
            yield x + y

    paired = IterMapDataset(val_ids(ids["a"], config), pairs, len_map_fn=lambda n: n // 2,
                            worker_config=config)  # fmt: skip
    assert len(list(get_loader(paired))) == len(paired) == A // 2


def test_watching_wrappers_pass_items_on(ids: dict[str, Path]) -> None:
    config = wc(2)
    inner = val_ids(ids["a"], config)
    watched = WatchdogDataset(GcDataset(LogSampleDataset(inner, "val", config),
                                        worker_config=config, every_n_iter=5), config)  # fmt: skip
    assert list(get_loader(watched)) == list(get_loader(inner))


def test_mix_of_wrapped_datasets(ids: dict[str, Path]) -> None:
    config = wc(2)
    small = BatchDataset(train_ids(ids["a"], config), 2, list, worker_config=config)
    large = BatchDataset(train_ids(ids["b"], config), 3, list, worker_config=config)
    mix = MixBatchDataset((small, 1), (large, 1), batch_size=2, worker_config=config)
    for output in itertools.islice(get_loader(mix), 20):
        assert len(output) == 2 and all(len(sub) in (2, 3) for sub in output)


def test_loader_classes_and_config_checks(ids: dict[str, Path]) -> None:
    config = wc(2)
    mapped = val_ids(ids["a"], config)
    assert isinstance(get_loader(mapped), BasicDataLoader)
    savable = get_savable_loader(mapped, checkpoint_every_sec=0, checkpoint_every_min_n_samples=1)
    assert isinstance(savable, SavableDataLoader)
    direct = SavableDataLoader(mapped, checkpoint_every_sec=5)
    assert sorted(direct) == list(range(A))
    with pytest.raises(ConfigError, match="worker_config"):
        MapDataset(mapped, id_of, worker_config=wc(1))
    with pytest.raises(ConfigError, match="LimitDataset"):
        BatchDataset(get_val_dataset(str(ids["a"]), split_part="train", batch_size=None,
                                     worker_config=config, limit=3), 2, list,
                     worker_config=config)  # fmt: skip
    with pytest.raises(ConfigError, match="dataset stoker can load"):
        MapDataset([1, 2], id_of, worker_config=config)  # type: ignore[arg-type]


def test_restore_sample_of_batches_and_wrapped_items(images: Path, ids: dict[str, Path]) -> None:
    config = wc(2)
    train = get_train_dataset(str(images), batch_size=3, worker_config=config,
                              shuffle_buffer_size=5, max_samples_per_sequence=3)  # fmt: skip
    loader = get_loader(train)
    assert loader.can_restore_sample()
    for batch in itertools.islice(loader, 4):
        again = loader.restore_sample(batch.__restore_key__)
        assert again.__key__ == batch.__key__ and torch.equal(again.image, batch.image)

    val = get_val_dataset(str(images), split_part="train", batch_size=None, worker_config=config)
    mapped = MapDataset(val, as_text, stateless_map_fn=True, worker_config=config)
    batched = BatchDataset(mapped, 4, generic_batch, batcher_stateless=True, worker_config=config)
    loader = get_loader(batched)
    assert loader.can_restore_sample()
    for batch in itertools.islice(loader, 3):
        again = loader.restore_sample(batch.__restore_key__)
        assert again.__key__ == batch.__key__
        assert torch.equal(again.image, batch.image) and torch.equal(again.caption, batch.caption)
    sample = next(iter(get_loader(mapped)))
    assert get_loader(mapped).restore_sample(sample.__restore_key__).__key__ == sample.__key__

    not_marked = get_loader(MapDataset(val, as_text, worker_config=config))
    assert not not_marked.can_restore_sample()
    with pytest.raises(ConfigError, match="cannot restore samples"):
        not_marked.restore_sample(sample.__restore_key__)


def test_restore_sample_through_a_blend(ids: dict[str, Path]) -> None:
    config = wc(0)
    parts = [get_train_dataset(str(ids[n]), batch_size=2, worker_config=config,
                               shuffle_buffer_size=None, max_samples_per_sequence=None)
             for n in ("a", "b")]  # fmt: skip
    loader = get_loader(BlendDataset((parts[0], 1), (parts[1], 1), worker_config=config))
    assert loader.can_restore_sample()
    for batch in itertools.islice(loader, 6):
        again = loader.restore_sample(batch["__restore_key__"])
        assert again["__key__"] == batch["__key__"] and again["json"] == batch["json"]


def test_wrappers_over_a_dataset_factory(images: Path) -> None:
    """Energon's pattern: ``MapDataset(get_dataset_from_config(...).build(), ...)``."""
    from stoker.flavors.config import get_dataset_from_config

    config = wc(2)
    factory = get_dataset_from_config(images, split_part="train", worker_config=config,
                                      training=False, sample_type=CaptioningSample)  # fmt: skip
    mapped = MapDataset(factory.build(), as_text, worker_config=config)
    assert len(mapped) == 17
    loader = get_savable_loader(BatchDataset(mapped, 4, generic_batch, worker_config=config))
    first = [list(b.__key__) for b in itertools.islice(loader, 2)]
    state = loader.save_state_rank()
    rest = [list(b.__key__) for b in loader]
    again = get_savable_loader(BatchDataset(mapped, 4, generic_batch, worker_config=config))
    again.restore_state_rank(state)
    assert [list(b.__key__) for b in again] == rest
    assert sorted(k for b in first + rest for k in b) == sorted(s.__key__ for s in mapped)


def test_savable_loader_methods_as_energon(ids: dict[str, Path]) -> None:
    config = wc(2)
    loader = get_savable_loader(val_ids(ids["a"], config))
    loader.restore_state_rank(None)  # nothing saved yet: starts at the beginning
    assert list(loader)[:3] == list(get_loader(val_ids(ids["a"], config)))[:3]
    assert loader.config()["type"] == "SavableDataLoader"
    assert loader.config()["dataset"]["wrappers"][0]["type"] == "MapDataset"
    assert get_loader(val_ids(ids["a"], config)).config()["num_workers"] == 2
    with pytest.warns(DeprecationWarning, match="save_state_global"):
        states = loader.save_state(0)
    assert states is not None and len(states) == 1
    with pytest.warns(DeprecationWarning, match="restore_state_global"):
        loader.restore_state(states)
