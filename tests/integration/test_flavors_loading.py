"""Dataset factories end to end: ``get_dataset_from_config``, classes named by ``dataset.yaml``
(a Bridge-style ``ChatMLWebdataset``, a user's Sample, a ``load_sample`` override), the
allow-list, ``split_config:`` and a sample loader's ``__key__``, in-process and with real workers.

The dataset is prepared through ``BaseWebdatasetFactory.prepare_dataset`` (Energon's call).
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from stoker import (
    BaseWebdatasetFactory,
    ConfigError,
    CrudeSample,
    DefaultCrudeJsonlDatasetFactory,
    EPath,
    JoinedWebdatasetFactory,
    MapDataset,
    StandardWebdatasetFactory,
    TextSample,
    TextWebdataset,
    WorkerConfig,
    get_dataset_from_config,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
)
from tests.conftest import text_samples, write_shard
from tests.integration.flavor_types import (
    CaptionedText,
    ChatMLSample,
    UpperTextWebdataset,
)

TYPES = "tests.integration.flavor_types"
#: 12 shards of 3 samples: more than 10, so that list order and name order differ.
SHARDS = 12
PER_SHARD = 3
KEYS = [f"s{s}_{i:05d}" for s in range(SHARDS) for i in range(PER_SHARD)]
LOADER_PY = """
def sample_loader(raw):
    assert "json" not in raw
    return {"__key__": "<SL>" + raw["__key__"], "text": "<SL>" + raw["txt"]}

def part_filter(part):
    return part == "txt"
"""


def yamls() -> dict[str, dict[str, Any]]:
    text = {"__module__": "megatron.energon", "__class__": "TextSample"}
    return {
        "dataset.yaml": {"sample_type": text, "field_map": {"text": "txt"}},
        "chat.yaml": {
            "__module__": TYPES,
            "__class__": "ChatMLWebdataset",
            "field_map": {"conversation": "json"},
            "subflavors": {"source": "chat"},
        },
        "custom.yaml": {
            "sample_type": {"__module__": TYPES, "__class__": "CaptionedText"},
            "field_map": {"text": "txt", "number": "json[i]"},
        },
        "upper.yaml": {
            "__module__": TYPES,
            "__class__": "UpperTextWebdataset",
            "field_map": {"text": "txt", "number": "json[i]"},
        },
        "function.yaml": {"__module__": TYPES, "__class__": "text_factory",
                          "field_map": {"text": "txt"}},
        "not_a_sample.yaml": {"__module__": TYPES, "__class__": "not_a_sample"},
        "system.yaml": {"__module__": "os", "__class__": "system", "field_map": {"text": "txt"}},
        "loader_key.yaml": {
            "sample_type": text,
            "sample_loader": "sample_loader.py:sample_loader",
            "part_filter": "sample_loader.py:part_filter",
        },
        "exclude.yaml": {"sample_type": text, "field_map": {"text": "txt"},
                         "split_config": "split2.yaml"},
        "nested.yaml": {"__module__": "stoker.flavors.generic",
                        "__class__": "StandardWebdatasetFactory",
                        "sample_type": {"__module__": TYPES, "__class__": "CaptionedText"},
                        "field_map": {"text": "txt"}},
        "nested_bad.yaml": {"__module__": "stoker.flavors.generic",
                            "__class__": "StandardWebdatasetFactory",
                            "sample_type": {"__module__": "os", "__class__": "getcwd"},
                            "field_map": {"text": "txt"}},
        "crude.yaml": {"__module__": "megatron.energon", "__class__": "CrudeWebdataset",
                       "subflavors": {"crude": True}},
    }  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("flavors") / "ds"
    for s in range(SHARDS):
        write_shard(root / "parts" / f"data-{s}.tar", text_samples(f"s{s}_", PER_SHARD))
    parts = BaseWebdatasetFactory.prepare_dataset(
        root,  # a pathlib.Path, as Energon's tests pass it
        [f"parts/data-{{0..{SHARDS - 1}}}.tar"],
        split_parts_ratio=[("train", 1.0)],
        shuffle_seed=None,
    )
    assert parts == {"txt", "json"}
    meta = root / ".nv-meta"
    for name, content in yamls().items():
        (meta / name).write_text(yaml.safe_dump(content))
    (meta / "sample_loader.py").write_text(LOADER_PY)
    split = yaml.safe_load((meta / "split.yaml").read_text())
    split["exclude"] = ["parts/data-0.tar", "parts/data-1.tar/s1_00001"]
    (meta / "split2.yaml").write_text(yaml.safe_dump(split))
    return root


def wc(num_workers: int = 0) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=num_workers)


def from_config(root: pathlib.Path, name: str = "dataset.yaml", **kwargs: Any) -> Any:
    options: dict[str, Any] = {"split_part": "train", "training": False, "worker_config": wc()}
    return get_dataset_from_config(root, dataset_config=name, **{**options, **kwargs})


def train_batches(root: pathlib.Path, name: str, num_workers: int, count: int = 6) -> list[Any]:
    ds = get_train_dataset(
        str(root),
        dataset_config=name,
        worker_config=wc(num_workers),
        batch_size=3,
        shuffle_buffer_size=4,
        max_samples_per_sequence=2,
    )
    with get_loader(ds) as loader:
        return [batch for batch, _ in zip(loader, range(count), strict=False)]


def test_prepare_dataset_keeps_the_listed_shard_order(dataset: pathlib.Path) -> None:
    info = json.loads((dataset / ".nv-meta" / ".info.json").read_text())
    assert list(info["shard_counts"]) == [f"parts/data-{s}.tar" for s in range(SHARDS)]
    keys = [s.__key__ for s in get_loader(from_config(dataset).build())]
    assert keys == KEYS  # one pass, in the listed order (data-2 before data-10)


@pytest.mark.parametrize("as_path", [str, EPath])
def test_prepare_dataset_takes_str_and_epath(tmp_path: pathlib.Path, as_path: Any) -> None:
    write_shard(tmp_path / "a.tar", text_samples("a", 2))
    write_shard(tmp_path / "b.tar", text_samples("b", 3))
    parts = BaseWebdatasetFactory.prepare_dataset(
        as_path(str(tmp_path)), ["a.tar", "b.tar"], split_parts_ratio=[("train", 1.0)]
    )
    assert parts == {"txt", "json"}
    (tmp_path / ".nv-meta" / "dataset.yaml").write_text(yaml.safe_dump(yamls()["dataset.yaml"]))
    assert len(from_config(tmp_path)) == 5


def test_standard_factory_from_config(dataset: pathlib.Path) -> None:
    factory = from_config(dataset, sample_type=TextSample, subflavors={"extra": 1})
    assert isinstance(factory, StandardWebdatasetFactory)
    assert factory.__sample_type__ is TextSample
    assert len(factory) == len(KEYS) and str(factory.paths[0]) == str(dataset)
    samples = list(get_loader(factory.build()))
    assert [s.text for s in samples] == [
        f"caption {k[: k.index('_') + 1]}{int(k[-5:])}" for k in KEYS
    ]
    assert all(s.__subflavors__ == {"extra": 1} for s in samples)
    again = [s.__key__ for s in get_loader(factory.build())]
    assert again == [s.__key__ for s in samples]
    assert factory.as_file_store()["s3_00001.txt"][0] == b"caption s3_1"


def test_training_build_loops_and_shuffles(dataset: pathlib.Path) -> None:
    factory = from_config(dataset, training=True, worker_config=wc(2))
    with get_loader(factory.build()) as loader:
        keys = [s.__key__ for s, _ in zip(loader, range(2 * len(KEYS)), strict=False)]
    assert sorted(keys[: len(KEYS)]) == sorted(KEYS)  # each epoch is a permutation
    assert keys[: len(KEYS)] != KEYS and len(keys) == 2 * len(KEYS)


def test_built_dataset_composes_with_map_dataset(dataset: pathlib.Path) -> None:
    mapped = MapDataset(from_config(dataset).build(), lambda s: s.text.upper(), worker_config=wc())
    assert list(get_loader(mapped))[:2] == ["CAPTION S0_0", "CAPTION S0_1"]


def test_sample_type_must_match(dataset: pathlib.Path) -> None:
    with pytest.raises(ConfigError, match="not a subclass of sample_type=CrudeSample"):
        from_config(dataset, sample_type=CrudeSample)
    with pytest.raises(ConfigError, match="ChatMLSample, which is not a subclass"):
        get_val_dataset(
            str(dataset), dataset_config="chat.yaml", worker_config=wc(), batch_size=2,
            split_part="train", sample_type=TextSample,
        )  # fmt: skip
    ds = get_val_dataset(
        str(dataset), dataset_config="custom.yaml", worker_config=wc(), batch_size=2,
        split_part="train", sample_type=CaptionedText,
    )  # fmt: skip
    assert len(ds) == len(KEYS) // 2


@pytest.mark.parametrize("num_workers", [0, 2])
def test_bridge_style_chatml_factory_named_by_dataset_yaml(
    dataset: pathlib.Path, num_workers: int
) -> None:
    batches = train_batches(dataset, "chat.yaml", num_workers)
    assert len(batches) == 6
    for batch in batches:
        assert isinstance(batch, ChatMLSample)
        # the factory's own decoder ran (JSON kept as text), not the task encoder's
        assert all(
            json.loads(c)["i"] == int(k[-5:])
            for c, k in zip(batch.conversation, batch.__key__, strict=True)
        )
        assert batch.__subflavors__[0] == {"source": "chat"}
    factory = from_config(
        dataset, "chat.yaml", sample_type=ChatMLSample, subflavors={"x": 1},
        worker_config=wc(num_workers),
    )  # fmt: skip
    assert type(factory).__name__ == "ChatMLWebdataset"
    samples = list(get_loader(factory.build()))
    assert sorted(s.__key__ for s in samples) == sorted(KEYS)
    first = next(s for s in samples if s.__key__ == KEYS[0])
    assert first.conversation == '{"i": 0}' and first.__subflavors__ == {"source": "chat", "x": 1}


@pytest.mark.parametrize("num_workers", [0, 2])
def test_user_sample_type_and_load_sample_override(dataset: pathlib.Path, num_workers: int) -> None:
    for name, upper in (("custom.yaml", False), ("upper.yaml", True)):
        for batch in train_batches(dataset, name, num_workers, count=4):
            assert isinstance(batch, CaptionedText)
            assert batch.number == [int(k[-5:]) for k in batch.__key__]
            assert all(t.isupper() == upper for t in batch.text)


def test_python_subclass_builds_in_workers(dataset: pathlib.Path) -> None:
    factory = UpperTextWebdataset(
        EPath(dataset), split_part="train", training=False, worker_config=wc(2),
        field_map={"text": "txt", "number": "json[i]"},
    )  # fmt: skip
    samples = list(get_loader(factory.build()))
    assert sorted(s.__key__ for s in samples) == sorted(KEYS)
    assert all(isinstance(s, CaptionedText) and s.text.startswith("CAPTION") for s in samples)


def test_dataset_yaml_may_not_name_other_callables(dataset: pathlib.Path) -> None:
    for name, what in (("system.yaml", "os.system"), ("not_a_sample.yaml", "not_a_sample")):
        with pytest.raises(
            ConfigError, match=f"{what}.*neither a Sample nor a dataset factory"
        ) as e:
            from_config(dataset, name)
        assert "allowed_modules=" in str(e.value) and "STOKER_ALLOWED_MODULES" in str(e.value)
        assert f".nv-meta/{name}" in str(e.value)  # the error names the file
        assert "sample_class" not in str(e.value)


def test_explicitly_allowed_module(dataset: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="neither a Sample"):
        from_config(dataset, "function.yaml")
    factory = from_config(dataset, "function.yaml", allowed_modules=(TYPES,))
    assert [s.text for s in get_loader(factory.build())][:1] == ["caption s0_0"]
    monkeypatch.setenv("STOKER_ALLOWED_MODULES", f"json,{TYPES}")
    batches = train_batches(dataset, "function.yaml", 2, count=2)
    assert all(isinstance(b, TextSample) for b in batches)


def test_split_config_key_of_dataset_yaml(dataset: pathlib.Path) -> None:
    expected = [k for k in KEYS if not k.startswith("s0_") and k != "s1_00001"]
    keys = [s.__key__ for s in get_loader(from_config(dataset, "exclude.yaml").build())]
    assert keys == expected
    val = get_val_dataset(
        str(dataset), dataset_config="exclude.yaml", split_part="train", worker_config=wc(),
        batch_size=1,
    )  # fmt: skip
    assert [k for b in get_loader(val) for k in b.__key__] == expected


def test_sample_loader_renames_key(dataset: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="STOKER_TRUST_SAMPLE_LOADER"):
        from_config(dataset, "loader_key.yaml")
    factory = from_config(dataset, "loader_key.yaml", trust_sample_loader=True)
    samples = list(get_loader(factory.build()))
    assert [s.__key__ for s in samples] == ["<SL>" + k for k in KEYS]
    assert all(s.text.startswith("<SL>caption") for s in samples)
    with pytest.raises(ConfigError, match="asks to run the Python file"):  # when made, not later
        get_train_dataset(
            str(dataset), dataset_config="loader_key.yaml", worker_config=wc(), batch_size=2,
            shuffle_buffer_size=None, max_samples_per_sequence=None,
        )  # fmt: skip
    monkeypatch.setenv("STOKER_TRUST_SAMPLE_LOADER", "1")
    batches = train_batches(dataset, "loader_key.yaml", 2, count=2)
    assert all(k.startswith("<SL>s") for b in batches for k in b.__key__)


def test_crude_factories(dataset: pathlib.Path, tmp_path: pathlib.Path) -> None:
    crude = from_config(dataset, "crude.yaml", sample_type=CrudeSample)
    first = next(iter(get_loader(crude.build())))
    assert isinstance(first, CrudeSample) and first["txt"] == "caption s0_0"
    assert first["__subflavors__"] == {"crude": True}
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(5)))
    assert DefaultCrudeJsonlDatasetFactory.prepare_dataset(path) == 5
    jsonl = get_dataset_from_config(path, training=False, worker_config=wc(), subflavors={"j": 1})
    assert isinstance(jsonl, DefaultCrudeJsonlDatasetFactory) and len(jsonl) == 5
    rows = list(get_loader(jsonl.build()))
    assert [r["json"]["i"] for r in rows] == list(range(5))
    assert rows[0]["__subflavors__"] == {"j": 1}


def test_typed_flavor_is_deprecated_but_loads(dataset: pathlib.Path) -> None:
    with pytest.warns(FutureWarning, match="TextWebdataset is deprecated"):
        factory = TextWebdataset(
            str(dataset), split_part="train", training=False, worker_config=wc(),
            field_map={"text": "txt"},
        )  # fmt: skip
    assert [s.text for s in get_loader(factory.build())][:1] == ["caption s0_0"]


def test_joined_factory(dataset: pathlib.Path) -> None:
    def factory(field: str) -> StandardWebdatasetFactory[TextSample]:
        return StandardWebdatasetFactory(
            dataset, sample_type=TextSample, field_map={"text": field}, split_part="train",
            training=False, worker_config=wc(),
        )  # fmt: skip

    joined = JoinedWebdatasetFactory(
        [factory("txt"), factory("json")], training=False, worker_config=wc(), joiner=TextSample
    )
    assert len(joined) == len(KEYS)
    samples = list(get_loader(joined.build()))
    assert [s.__key__ for s in samples] == KEYS
    assert samples[0].text == {"i": 0}  # the later dataset's field wins (from_joined)


def test_metadataset_blends_datasets_named_by_factory_classes(
    dataset: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    blend = tmp_path / "blend.yaml"
    blend.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n"
        f"      - {{weight: 1, path: {dataset}, dataset_config: upper.yaml}}\n"
        f"      - {{weight: 1, path: {dataset}, dataset_config: custom.yaml,"
        " subflavors: {plain: true}}\n"
    )
    ds = get_train_dataset(
        str(blend), worker_config=wc(2), batch_size=4, shuffle_buffer_size=None,
        max_samples_per_sequence=None, sample_type=CaptionedText,
    )  # fmt: skip
    with get_loader(ds) as loader:
        samples = [
            (text, flavors)
            for batch, _ in zip(loader, range(10), strict=False)
            for text, flavors in zip(batch.text, batch.__subflavors__, strict=True)
        ]
    upper = [flavors for text, flavors in samples if text.isupper()]
    plain = [flavors for text, flavors in samples if not text.isupper()]
    assert upper and plain  # both datasets, each loaded by its own class
    assert all(f == {"plain": True} for f in plain) and all(not f for f in upper)


def test_class_arguments_in_a_factory_form_dataset_yaml(dataset: pathlib.Path) -> None:
    factory = from_config(dataset, "nested.yaml", sample_type=CaptionedText)
    assert isinstance(factory, StandardWebdatasetFactory)
    first = next(iter(get_loader(factory.build())))
    assert isinstance(first, CaptionedText) and first.text == "caption s0_0" and first.number == -1
    with pytest.raises(ConfigError, match=r"os\.getcwd, which is neither"):
        from_config(dataset, "nested_bad.yaml")


def test_prepare_dataset_with_split_patterns(tmp_path: pathlib.Path) -> None:
    """Megatron-Bridge's call: relative shard paths, regex patterns per split, no shuffle."""
    names = [f"{split}/part-{i}.tar" for split in ("tr", "va") for i in range(2)]
    for i, name in enumerate(names):
        write_shard(tmp_path / name, text_samples(f"k{i}_", 2))
    BaseWebdatasetFactory.prepare_dataset(
        tmp_path, names, split_parts_patterns=[("train", r"tr/.*"), ("val", r"va/part-[0-9]")],
        shuffle_seed=None, workers=2, split_config="patterns.yaml",
    )  # fmt: skip
    split = yaml.safe_load((tmp_path / ".nv-meta" / "patterns.yaml").read_text())
    assert not (tmp_path / ".nv-meta" / "split.yaml").exists()
    (tmp_path / ".nv-meta" / "dataset.yaml").write_text(yaml.safe_dump(yamls()["dataset.yaml"]))
    val = from_config(tmp_path, split_part="val", split_config="patterns.yaml")
    assert [s.__key__ for s in get_loader(val.build())] == [
        "k2_00000",
        "k2_00001",
        "k3_00000",
        "k3_00001",
    ]
    assert split["split_parts"]["train"] == ["tr/part-{0..1}.tar"]


def test_factory_datasets_save_restore_and_restore_samples(dataset: pathlib.Path) -> None:
    def loader() -> Any:
        ds = get_train_dataset(
            str(dataset), dataset_config="chat.yaml", worker_config=wc(2), batch_size=2,
            shuffle_buffer_size=4, max_samples_per_sequence=2,
        )  # fmt: skip
        return get_savable_loader(ds)

    with loader() as first:
        it = iter(first)
        head = [next(it) for _ in range(3)]
        state = first.save_state_rank()
        tail = [next(it).__key__ for _ in range(4)]
        again = first.restore_sample(head[1].__restore_key__)
    assert isinstance(again, ChatMLSample) and again.__key__ == head[1].__key__
    assert again.conversation == head[1].conversation
    with loader() as second:
        second.restore_state_rank(state)
        it = iter(second)
        assert [next(it).__key__ for _ in range(4)] == tail


def test_empty_split_part_raises_empty_dataset_error(tmp_path: pathlib.Path) -> None:
    from stoker.flavors import EmptyDatasetError

    write_shard(tmp_path / "a.tar", text_samples("a", 2))
    BaseWebdatasetFactory.prepare_dataset(
        tmp_path, ["a.tar"], split_parts_ratio=[("train", 1.0), ("val", 0.0)]
    )
    (tmp_path / ".nv-meta" / "dataset.yaml").write_text(yaml.safe_dump(yamls()["dataset.yaml"]))
    with pytest.raises(EmptyDatasetError, match="no shards in split part 'val'"):
        from_config(tmp_path, split_part="val")
