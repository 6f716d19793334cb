"""Energon's metadataset behaviour: V1 YAML (with and without a header), get_val_datasets with
one dataset per source, traverse_metadataset / prepare_metadataset, and few samples over many
ranks (every rank gets batches; Energon's rotation of each dataset's extra samples)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    EPath,
    LimitDataset,
    RepeatDataset,
    TraversedDatasetReference,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_datasets,
    load_dataset,
    prepare_metadataset,
    traverse_metadataset,
)
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.metadataset import DatasetBlendMode, Metadataset
from tests.conftest import write_shard

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
V1_HEADER = "__module__: megatron.energon\n__class__: Metadataset\n"
V1_BODY = (
    "splits:\n  train:\n    datasets:\n"
    "      - weight: 3\n        path: ./coco\n        subflavor: legacy\n"
    "      - weight: 1\n        path: coyo\n        subflavors: {source: coyo}\n"
    "  val:\n    datasets:\n      - path: coco\n      - path: coyo\n"
)


def make_text_dataset(root: Path, name: str, train: int, val: int, per_shard: int = 10) -> None:
    """``train`` + ``val`` text samples ``{name}{i}`` in shards of ``per_shard``."""
    for split, count, first in (("train", train, 0), ("val", val, train)):
        for s, lo in enumerate(range(first, first + count, per_shard)):
            ids = range(lo, min(first + count, lo + per_shard))
            samples = [(f"{name}{i:05d}", {"txt": f"{name}{i}".encode()}) for i in ids]
            write_shard(root / name / f"{split}_{s:02d}.tar", samples)
    prepare_dataset(
        str(root / name),
        split_parts=[("train", "train_"), ("val", "val_")],
        dataset_yaml={
            **make_dataset_yaml("TextSample", {"text": "txt"}),
            "subflavors": {"from_yaml": name},
        },
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("energon_mds")
    make_text_dataset(base, "coco", train=60, val=20)
    make_text_dataset(base, "coyo", train=40, val=12)
    return base


def config(workers: int = 0, world: int = 1, rank: int = 0) -> WorkerConfig:
    return WorkerConfig(rank=rank, world_size=world, num_workers=workers)


def train(path: Any, wc: WorkerConfig | None = None, **options: Any) -> Any:
    return get_train_dataset(
        path,
        worker_config=wc or config(),
        batch_size=options.pop("batch_size", 1),
        shuffle_buffer_size=options.pop("shuffle_buffer_size", 10),
        max_samples_per_sequence=options.pop("max_samples_per_sequence", 10),
        **options,
    )


def sources_of(batches: list[Any]) -> collections.Counter[str]:
    return collections.Counter(text[:4] for batch in batches for text in batch.text)


@pytest.mark.parametrize("header", ["", V1_HEADER], ids=["no_header", "energon_v1_header"])
def test_v1_yaml_blends_by_weight_with_legacy_subflavor(root: Path, header: str) -> None:
    path = root / f"v1_{len(header)}.yaml"
    path.write_text(header + V1_BODY)
    loaded = load_dataset(path)
    assert isinstance(loaded, Metadataset) and loaded.version == "v1"
    ds = train(str(path), batch_size=4)
    batches = [batch for _, batch in zip(range(100), ds, strict=False)]
    counts = sources_of(batches)
    assert set(counts) == {"coco", "coyo"}
    assert 2.2 < counts["coco"] / counts["coyo"] < 4.0  # weights 3 : 1
    flavors = {
        (text[:4], str(sorted(f.items())))
        for batch in batches
        for text, f in zip(batch.text, batch.__subflavors__, strict=True)
    }
    assert flavors == {
        ("coco", str(sorted({"__subflavor__": "legacy", "from_yaml": "coco"}.items()))),
        ("coyo", str(sorted({"source": "coyo", "from_yaml": "coyo"}.items()))),
    }


def test_v2_with_energon_module_still_loads(root: Path) -> None:
    path = root / "v2.yaml"
    path.write_text(V2 + "  train:\n    blend:\n      - weight: 1\n        path: coco\n")
    ds = train(path)
    assert set(sources_of([batch for _, batch in zip(range(10), ds, strict=False)])) == {"coco"}


def write_val_mds(root: Path) -> Path:
    path = root / "val_mds.yaml"
    path.write_text(
        V2 + "  val:\n    blend:\n"
        "      - weight: 1\n        path: coco\n        subflavors: {source: a}\n"
        "      - weight: 1\n        path: coyo\n        subflavors: {source: b}\n"
    )
    return path


@pytest.mark.parametrize("workers", [0, 2])
def test_get_val_datasets_one_dataset_per_source(root: Path, workers: int) -> None:
    wc = config(workers)
    pairs = get_val_datasets(write_val_mds(root), worker_config=wc, batch_size=5)
    assert [dict(factory.subflavors) for _, factory in pairs] == [
        {"source": "a", "from_yaml": "coco"},
        {"source": "b", "from_yaml": "coyo"},
    ]
    assert [len(factory) for _, factory in pairs] == [20, 12]
    assert [factory.paths for _, factory in pairs] == [
        [EPath(root / "coco")],
        [EPath(root / "coyo")],
    ]
    for (val, factory), name, total in zip(pairs, ["coco", "coyo"], [20, 12], strict=True):
        with get_loader(val, worker_config=wc) as loader:
            batches = list(loader)
        texts = [text for batch in batches for text in batch.text]
        first = 60 if name == "coco" else 40  # val samples follow the train ones
        assert sorted(texts) == sorted(f"{name}{i}" for i in range(first, first + total))
        assert len(val) == len(batches)
        unbatched = [sample.text for sample in get_loader(factory.build())]
        assert sorted(unbatched) == sorted(texts)


def test_get_val_datasets_as_megatron_lm_wraps_them(root: Path) -> None:
    """Megatron-LM's dataloader_provider: LimitDataset(RepeatDataset(val_ds)) per val source."""
    wc = config(2)
    pairs = get_val_datasets(write_val_mds(root), worker_config=wc, batch_size=4)
    wrapped = [
        LimitDataset(RepeatDataset(val, worker_config=wc), length=7, worker_config=wc,
                     reset_after_epoch=True)
        for val, _src in pairs
    ]  # fmt: skip
    for ds, name in zip(wrapped, ["coco", "coyo"], strict=True):
        with get_loader(ds, worker_config=wc) as loader:
            batches = list(loader)
        assert len(batches) == 7
        assert set(sources_of(batches)) == {name}


def test_traverse_metadataset_recurses_and_keeps_hierarchy_subflavors(root: Path) -> None:
    inner = root / "inner.yaml"
    inner.write_text(
        V2 + "  train:\n    blend:\n"
        "      - weight: 1\n        path: coco\n        subflavors: {level: inner, a: 1}\n"
        "      - weight: 2\n        path: coyo\n        split_part: val\n"
    )
    outer = root / "outer.yaml"
    outer.write_text(
        V2 + "  train:\n    blend:\n"
        "      - weight: 1\n        path: inner.yaml\n        subflavors: {level: outer}\n"
        "      - weight: 1\n        path: coco\n"
    )
    refs = traverse_metadataset(outer, split_part="train")
    assert all(isinstance(r, TraversedDatasetReference) for r in refs)
    assert [r.path for r in refs] == [EPath(root / "coco"), EPath(root / "coyo"),
                                      EPath(root / "coco")]  # fmt: skip
    assert [r.split_part for r in refs] == ["train", "val", "train"]
    # outer levels win; a dataset's own dataset.yaml subflavors are not part of traversal
    assert [r.subflavors for r in refs] == [{"level": "outer", "a": 1}, {"level": "outer"}, {}]
    assert all(r.aux == {} for r in refs)


def test_traverse_metadataset_keeps_missing_leaf_and_aux(root: Path) -> None:
    path = root / "missing_leaf.yaml"
    path.write_text(
        V2 + "  train:\n    path: not_there\n    aux:\n"
        "      labels: not_there_either\n      media: filesystem://media\n"
    )
    (ref,) = traverse_metadataset(str(path), split_part="train")
    assert ref.path == EPath(root / "not_there") and ref.split_part == "train"
    assert ref.aux == {"labels": EPath(root / "not_there_either"), "media": EPath(root / "media")}


def test_traverse_and_prepare_refuse_non_metadatasets_and_joins(root: Path) -> None:
    with pytest.raises(ConfigError, match="metadataset YAML"):
        traverse_metadataset(root / "coco", split_part="train")
    with pytest.raises(ConfigError, match="metadataset YAML"):
        prepare_metadataset(root / "coco")
    joined = root / "joined.yaml"
    joined.write_text(
        V2 + "  train:\n    join:\n      - path: coco\n      - path: coco\n"
        "    joiner:\n      __module__: stoker\n      __class__: TextSample\n"
    )
    with pytest.raises(NotImplementedError, match="joined"):
        traverse_metadataset(joined, split_part="train")


def test_prepare_metadataset_builds_join_indexes(root: Path) -> None:
    path = root / "join_prepare.yaml"
    path.write_text(
        V2 + "  train:\n    join:\n      - path: coco\n      - path: coco\n        nonmatch: skip\n"
        "    joiner:\n      __module__: tests.integration.join_types\n"
        "      __class__: JoinedSample\n"
    )
    reports = prepare_metadataset(EPath(path), allowed_modules=("tests.integration.join_types",))
    assert [(r.split, r.samples, r.matched, r.up_to_date) for r in reports] == [
        ("train", 60, (60,), False)
    ]
    assert reports[0].path is not None and Path(reports[0].path).is_file()
    again = prepare_metadataset(str(path), allowed_modules=("tests.integration.join_types",))
    assert [r.up_to_date for r in again] == [True]
    assert prepare_metadataset(write_val_mds(root)) == []


def test_prepare_metadataset_needs_no_importable_joiner(root: Path) -> None:
    """As Energon: preparing a join's index does not import the joiner (loading does)."""
    path = root / "join_mock.yaml"
    path.write_text(
        V2 + "  train:\n    join:\n      - path: coco\n      - path: coco\n"
        "    joiner:\n      __module__: no_such_module_here\n      __class__: Missing\n"
    )
    (report,) = prepare_metadataset(path)
    assert report.matched == (60,)
    with pytest.raises(ConfigError, match="no_such_module_here"):
        train(path)


def test_energon_keywords_pass_through_and_unknown_ones_fail(root: Path) -> None:
    """Every keyword Energon 7.4.1's get_train_dataset takes or passes through."""
    from stoker import DefaultTaskEncoder

    ds = get_train_dataset(
        str(root / "coco"),
        split_part="train",
        worker_config=config(),
        batch_size=2,
        batch_drop_last=True,
        packing_buffer_size=None,
        shuffle_buffer_size=5,
        max_samples_per_sequence=5,
        virtual_epoch_length=3,
        shuffle_over_epochs_multiplier=2,
        task_encoder=DefaultTaskEncoder(),
        repeat=True,
        dataset_config="dataset.yaml",
        split_config="split.yaml",
        subflavors={"extra": 1},
        parallel_shard_iters=2,
        subset=_EnergonSubset(range=(0.0, 0.5)),
    )
    batches = list(ds)
    assert len(batches) == 3  # virtual_epoch_length
    texts = [text for batch in batches for text in batch.text]
    assert all(int(text[4:]) < 30 for text in texts)  # subset: first half of 60
    assert all(f == {"from_yaml": "coco", "extra": 1} for b in batches for f in b.__subflavors__)
    with pytest.raises(ConfigError, match=r"unknown argument.*no_such_option"):
        train(str(root / "coco"), no_such_option=1)
    with pytest.raises(ConfigError, match="subset"):
        train(write_val_mds(root), split_part="val", subset=_EnergonSubset(range=(0.0, 0.5)))


class _EnergonSubset:
    """The shape of Energon's ``DatasetSubset``: ``range`` and ``absolute_range``."""

    def __init__(self, range: tuple[float, float] | None = None) -> None:
        self.range = range
        self.absolute_range: tuple[int, int | None] | None = None


# -- few samples, many ranks ---------------------------------------------------------------


@pytest.fixture(scope="module")
def few(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Energon's few-samples blend: 55 + 7 + 55 = 117 samples in shards of 10."""
    base = tmp_path_factory.mktemp("few")
    for name, count in (("ds1", 55), ("ds2", 7), ("ds3", 55)):
        for s, lo in enumerate(range(0, count, 10)):
            ids = range(lo, min(count, lo + 10))
            samples = [(f"{name}_{i:03d}", {"txt": f"{name}_{i}".encode()}) for i in ids]
            write_shard(base / name / f"data-{s}.tar", samples)
        prepare_dataset(str(base / name), split_ratio=[("train", 1.0)],
                        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}))  # fmt: skip
    (base / "mds.yaml").write_text(
        V2
        + "  train:\n    blend:\n"
        + "".join(f"      - weight: 1\n        path: {n}\n" for n in ("ds1", "ds2", "ds3"))
    )
    return base


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize(("target", "world"), [("mds.yaml", 100), ("ds1", 50)])
def test_every_rank_gets_batches_with_fewer_samples_than_workers(
    few: Path, workers: int, target: str, world: int
) -> None:
    """117 samples (55 + 7 + 55) over 100 ranks, or 55 over 50 ranks, with 0 or 2 workers:
    every rank (not every worker) has samples, as in Energon."""
    wanted = 6
    started = time.process_time()
    seen: collections.Counter[str] = collections.Counter()
    for rank in range(world):
        ds = train(few / target, config(workers, world, rank), shuffle_buffer_size=100,
                   max_samples_per_sequence=None)  # fmt: skip
        batches = [batch for _, batch in zip(range(wanted), ds, strict=False)]
        assert len(batches) == wanted, f"rank {rank} got {len(batches)} batches"
        seen.update(batch.__key__[0] for batch in batches[:1])
    # The first batches of the ranks are distinct samples, spread over all the datasets.
    assert len(seen) == world
    if target == "mds.yaml":
        assert {key[:3] for key in seen} == {"ds1", "ds2", "ds3"}
    assert time.process_time() - started < 60  # was minutes of CPU before the fast path


def test_few_samples_rank_with_real_workers(few: Path) -> None:
    wc = config(2, world=100, rank=99)
    ds = train(few / "mds.yaml", wc, shuffle_buffer_size=100, max_samples_per_sequence=None)
    with get_loader(ds, worker_config=wc) as loader:
        batches = [batch for _, batch in zip(range(8), loader, strict=False)]
    assert len(batches) == 8
    assert len({batch.__key__[0] for batch in batches}) >= 1


def test_load_dataset_get_datasets_lists_weights_and_factories(root: Path) -> None:
    """Energon's ``load_dataset(mds).get_datasets(...)``: weights multiplied down the tree,
    one factory per dataset with its merged subflavors (the dataset.yaml's included)."""
    inner = root / "gd_inner.yaml"
    inner.write_text(
        V2 + "  train:\n    blend:\n"
        "      - weight: 1\n        path: coco\n        subflavors: {n: 1}\n"
        "      - weight: 3\n        path: coyo\n"
    )
    outer = root / "gd_outer.yaml"
    outer.write_text(
        V2 + "  train:\n    blend:\n"
        "      - weight: 4\n        path: gd_inner.yaml\n        subflavors: {mds: outer}\n"
        "      - weight: 1\n        path: coco\n"
    )
    found = load_dataset(outer).get_datasets(
        training=False, split_part="train", worker_config=config()
    )
    assert found.blend_mode == DatasetBlendMode.DATASET_WEIGHT
    assert [round(d.weight, 6) for d in found.datasets] == [0.2, 0.6, 0.2]
    assert [d.dataset.paths[0].name for d in found.datasets] == ["coco", "coyo", "coco"]
    assert [d.dataset.subflavors for d in found.datasets] == [
        {"from_yaml": "coco", "n": 1, "mds": "outer"},
        {"from_yaml": "coyo", "mds": "outer"},
        {"from_yaml": "coco"},
    ]
    assert [len(d.dataset) for d in found.datasets] == [60, 40, 60]
    samples = list(get_loader(found.datasets[1].dataset.build()))
    assert sorted(s.text for s in samples) == sorted(f"coyo{i}" for i in range(40))
    in_order = load_dataset(outer).get_datasets(
        training=True,
        split_part="train",
        worker_config=config(),
        shuffle_over_epochs_multiplier=None,
        parallel_shard_iters=1,
    )
    built = in_order.datasets[2].dataset.build()
    texts = [s.text for _, s in zip(range(120), get_loader(built), strict=False)]
    assert texts == [f"coco{i}" for i in range(60)] * 2  # no slice shuffle, no interleave
    with pytest.raises(TypeError):
        load_dataset(outer).get_datasets(
            training=True, split_part="train", worker_config=config(), no_such=1
        )
    epochized = root / "gd_epochized.yaml"
    epochized.write_text(
        V2 + "  train:\n    blend_epochized:\n"
        "      - repetitions: 2\n        path: coco\n      - repetitions: 0.5\n        path: coyo\n"
    )
    found = load_dataset(epochized).get_datasets(
        training=True, split_part="train", worker_config=config()
    )
    assert found.blend_mode == DatasetBlendMode.SAMPLE_REPETITIONS
    assert [(d.weight, d.repetitions) for d in found.datasets] == [(None, 2.0), (None, 0.5)]
    single = root / "gd_single.yaml"
    single.write_text(V2 + "  train:\n    path: coco\n")
    found = load_dataset(single).get_datasets(
        training=True, split_part="train", worker_config=config()
    )
    assert found.blend_mode == DatasetBlendMode.NONE
    assert [(d.weight, d.repetitions) for d in found.datasets] == [(None, None)]


def test_traverse_v1_without_header(root: Path) -> None:
    path = root / "v1_traverse.yaml"
    path.write_text(V1_BODY)
    refs = traverse_metadataset(path, split_part="train")
    assert [(r.path.name, r.subflavors) for r in refs] == [
        ("coco", {"__subflavor__": "legacy"}),
        ("coyo", {"source": "coyo"}),
    ]


def test_shuffle_over_epochs_multiplier_none_reads_slices_in_order(root: Path) -> None:
    """Energon: ``None`` turns slice shuffling off (here without interleave or shuffle buffer:
    the split in order, every epoch); in a metadataset ``null`` wins over the loader's value."""
    options: dict[str, Any] = {"shuffle_buffer_size": None, "max_samples_per_sequence": 5,
                               "parallel_shard_iters": 1, "batch_size": 10}  # fmt: skip
    ds = train(str(root / "coco"), shuffle_over_epochs_multiplier=None, **options)
    texts = [t for _, batch in zip(range(12), ds, strict=False) for t in batch.text]
    assert texts == [f"coco{i}" for i in range(60)] * 2
    shuffled = train(str(root / "coco"), **options)
    assert [t for _, b in zip(range(6), shuffled, strict=False) for t in b.text] != texts[:60]
    path = root / "in_order.yaml"
    path.write_text(V2 + "  train:\n    path: coco\n    shuffle_over_epochs_multiplier: null\n")
    ds = train(path, shuffle_over_epochs_multiplier=3, **options)
    assert [t for _, b in zip(range(6), ds, strict=False) for t in b.text] == texts[:60]


@pytest.mark.parametrize("workers", [0, 2])
def test_epochized_few_samples_pass_sees_every_sample_as_often_as_asked(
    few: Path, workers: int
) -> None:
    """blend_epochized over 117 samples and 60 ranks, repeat=False: one pass over all ranks
    reads ds1 twice, ds2 once and ds3 once (the rotated per-stream allotments add up)."""
    path = few / "epochized.yaml"
    path.write_text(
        V2 + "  train:\n    blend_epochized:\n"
        "      - repetitions: 2\n        path: ds1\n"
        "      - repetitions: 1\n        path: ds2\n      - repetitions: 1\n        path: ds3\n"
    )
    seen: collections.Counter[str] = collections.Counter()
    for rank in range(60):
        ds = train(path, config(workers, 60, rank), repeat=False, shuffle_buffer_size=4)
        seen.update(text for batch in ds for text in batch.text)
    expected = {f"ds1_{i}": 2 for i in range(55)}
    expected |= {f"ds2_{i}": 1 for i in range(7)} | {f"ds3_{i}": 1 for i in range(55)}
    assert dict(seen) == expected
