"""Metadatasets end to end: blends keep their ratio, epochized blends their counts, subsets
their ranges, subflavors their precedence; and blended loaders restore exactly."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import write_shard
from tests.contract.contract import run_contract

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


def make_text_dataset(root: Path, name: str, shards: int, per_shard: int) -> Path:
    """``shards`` shards of text samples ``{name}_{s}_{i}``; shards are split train/val by name."""
    for s in range(shards):
        samples = [(f"{name}_{s}_{i:04d}", {"txt": name.encode()}) for i in range(per_shard)]
        write_shard(root / name / f"{'val' if s == 0 else 'train'}_{s}.tar", samples)
    prepare_dataset(
        str(root / name),
        split_parts=[("train", "train_"), ("val", "val_")],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return root / name


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mds")
    make_text_dataset(base, "coco", shards=5, per_shard=200)  # train 800, val 200
    make_text_dataset(base, "coyo", shards=4, per_shard=150)  # train 450, val 150
    return base


def write_yaml(root: Path, name: str, body: str) -> str:
    path = root / name
    path.write_text(HEADER + body)
    return str(path)


def config(workers: int = 2, world: int = 1, rank: int = 0) -> WorkerConfig:
    return WorkerConfig(rank=rank, world_size=world, num_workers=workers)


def train(path: str, **options: Any) -> Any:
    options = {"batch_size": 10, "shuffle_buffer_size": 10, "max_samples_per_sequence": 10,
               "worker_config": config(), **options}  # fmt: skip
    return get_train_dataset(path, **options)


TUTORIAL = """  train:
    blend:
      - weight: 5
        path: ./coco
      - weight: 2
        path: ./coyo
  val:
    blend:
      - weight: 1
        path: ./coco
      - weight: 1
        path: ./coyo
"""


def test_weighted_blend_keeps_its_ratio(root: Path) -> None:
    path = write_yaml(root, "tutorial.yaml", TUTORIAL)
    counts: collections.Counter[str] = collections.Counter()
    with get_loader(train(path)) as loader:
        for step, batch in enumerate(loader):
            counts.update(batch.text)
            if step == 1399:  # 14 000 samples
                break
    share = counts["coco"] / sum(counts.values())
    assert abs(share - 5 / 7) < 0.015


def test_val_split_concatenates(root: Path) -> None:
    path = write_yaml(root, "tutorial_val.yaml", TUTORIAL)
    val = get_val_dataset(path, worker_config=config(), batch_size=7)
    keys = [key for batch in get_loader(val) for key in batch.__key__]
    assert len(keys) == len(set(keys)) == 200 + 150
    assert {key.split("_")[0] for key in keys} == {"coco", "coyo"}


def test_epochized_blend_gives_exact_repetitions(root: Path) -> None:
    path = write_yaml(
        root,
        "epochized.yaml",
        "  train:\n    blend_epochized:\n"
        "      - repetitions: 2\n        path: ./coco\n"
        "      - repetitions: 0.5\n        path: ./coyo\n",
    )
    keys = [k for b in get_loader(train(path, repeat=False)) for k in b.__key__]
    counts = collections.Counter(keys)
    coco = [n for k, n in counts.items() if k.startswith("coco")]
    coyo = [n for k, n in counts.items() if k.startswith("coyo")]
    assert len(coco) == 800 and set(coco) == {2}
    assert len(coyo) == 450 // 2 and set(coyo) == {1}


def test_nested_percentage_subsets(root: Path) -> None:
    (root / "inner.yaml").write_text(
        HEADER + "  train:\n    path: ./coco\n    subset: {range: [20%, 100%]}\n"
    )
    path = write_yaml(
        root, "outer.yaml", "  train:\n    path: ./inner.yaml\n    subset: {range: [0%, 50%]}\n"
    )
    val = get_val_dataset(path, split_part="train", worker_config=config(0), batch_size=50)
    keys = sorted(k for b in get_loader(val) for k in b.__key__)
    # coco train is 800 samples (shards 1-4); inner 20-100% = [160, 800); outer 0-50% of it
    # = [160, 480): 320 samples, from the 2nd shard's 161st sample on
    assert len(keys) == 320
    assert keys[0] == "coco_1_0160" and keys[-1] == "coco_3_0079"


def test_subflavors_outer_wins(root: Path) -> None:
    (root / "flavored_inner.yaml").write_text(
        HEADER + "  train:\n    blend:\n"
        "      - weight: 1\n        path: ./coco\n        subflavors: {source: inner, kind: a}\n"
        "      - weight: 1\n        path: ./coyo\n"
    )
    path = write_yaml(
        root,
        "flavors.yaml",
        "  train:\n    path: ./flavored_inner.yaml\n    subflavors: {source: outer}\n",
    )
    batch = next(iter(get_loader(train(path, batch_size=20))))
    flavors = {str(sorted(f.items())) for f in batch.__subflavors__}
    assert flavors == {"[('kind', 'a'), ('source', 'outer')]", "[('source', 'outer')]"}
    # as in Energon, the samples of one dataset carry its one subflavors dict (not a copy each)
    assert len({id(f) for f in batch.__subflavors__}) == 2


def test_dataset_named_twice_warns_and_gets_its_own_order(root: Path) -> None:
    path = write_yaml(
        root,
        "twice.yaml",
        "  train:\n    blend:\n"
        "      - weight: 1\n        path: ./coco\n      - weight: 1\n        path: ./coco\n",
    )
    with pytest.warns(UserWarning, match="named more than once"):
        ds = train(path, worker_config=config(0), virtual_workers=1)
    assert ds.plan(0, 0).refs(0, 0, 20).tolist() != ds.plan(0, 1).refs(0, 0, 20).tolist()


def test_weighted_blend_without_repeat_is_refused(root: Path) -> None:
    path = write_yaml(root, "norepeat.yaml", TUTORIAL)
    with pytest.raises(ConfigError, match="weighted blend needs repeat=True"):
        train(path, repeat=False)


@pytest.mark.parametrize("workers", [0, 2])
def test_blends_restore_exactly(root: Path, workers: int) -> None:
    weighted = write_yaml(root, "contract_w.yaml", TUTORIAL)

    def make() -> Loader:
        return get_loader(train(weighted, worker_config=config(workers), virtual_workers=2))

    run_contract(make, total=40, midpoints=[0, 3, 17, 31])

    epochized = write_yaml(
        root,
        "contract_e.yaml",
        "  train:\n    blend_epochized:\n"
        "      - repetitions: 1.5\n        path: ./coco\n"
        "      - repetitions: 1\n        path: ./coyo\n",
    )

    def make_epochized() -> Loader:
        ds = train(epochized, worker_config=config(workers), virtual_workers=2, repeat=False)
        return get_loader(ds)

    run_contract(make_epochized, total=150, midpoints=[0, 60, 124, 125, 140])


def test_loader_reports_the_realised_blend(root: Path) -> None:
    path = write_yaml(root, "observed.yaml", TUTORIAL)
    with get_loader(train(path, worker_config=config(0))) as loader:
        for step, _ in enumerate(loader):
            if step == 69:  # 700 samples
                break
        seen = loader.samples_per_dataset()
    assert seen == {str(root / "coco"): 500, str(root / "coyo"): 200}


def test_blender_and_load_dataset_in_python(root: Path) -> None:
    from stoker import Blender, load_dataset

    blend = Blender([(str(root / "coco"), 5), (str(root / "coyo"), 2)])
    counts: collections.Counter[str] = collections.Counter()
    with get_loader(train(blend, worker_config=config(0))) as loader:
        for step, batch in enumerate(loader):
            counts.update(batch.text)
            if step == 69:
                break
    assert counts == {"coco": 500, "coyo": 200}
    val = get_val_dataset(blend, worker_config=config(0), batch_size=50)
    assert sum(len(b.__key__) for b in get_loader(val)) == 350
    mds = load_dataset(write_yaml(root, "loaded.yaml", TUTORIAL))
    assert sorted(mds.splits) == ["train", "val"]  # type: ignore[union-attr]
    assert len(next(iter(get_loader(train(mds)))).text) == 10
    with pytest.raises(ConfigError, match="positive weight"):
        Blender([(str(root / "coco"), 0)])


def test_subsets_restore_exactly(root: Path) -> None:
    path = write_yaml(
        root,
        "contract_subset.yaml",
        "  train:\n    blend:\n"
        "      - weight: 1\n        path: ./coco\n        subset: {range: [10%, 60%]}\n"
        "      - weight: 1\n        path: ./coyo\n        subset: {range: [0, 100]}\n",
    )

    def make() -> Loader:
        return get_loader(train(path, worker_config=config(2), virtual_workers=2))

    run_contract(make, total=30, midpoints=[0, 7, 19])
    with make() as loader:
        keys = {k for _, batch in zip(range(30), loader, strict=False) for k in batch.__key__}
    coyo = {k for k in keys if k.startswith("coyo")}
    assert coyo and all(int(k.split("_")[1]) == 1 for k in coyo)  # first 100 of coyo's train
