"""Sample types, field maps, crude samples and sample loaders."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker.errors import ConfigError, SampleError
from stoker.format.dataset_config import parse_dataset_config
from stoker.format.sample_types import SAMPLE_TYPES
from stoker.model.samples import (
    SAMPLE_CLASSES,
    CaptioningSample,
    CrudeSample,
    Sample,
    SourceInfo,
    TextSample,
    VQASample,
)
from stoker.sources.field_map import build_sample, load_part_filter, load_sample_loader

SRC = SourceInfo(dataset_path="/d", index=3, shard_name="s.tar", file_names=("a.txt",))


def config(sample_type: str, field_map: dict[str, str] | None = None, **extra: Any) -> Any:
    raw: dict[str, Any] = {
        "sample_type": {"__module__": "megatron.energon", "__class__": sample_type}
    }
    if field_map is not None:
        raw["field_map"] = field_map
    return parse_dataset_config({**raw, **extra}, "dataset.yaml")


def test_sample_classes_agree_with_catalogue() -> None:
    assert set(SAMPLE_CLASSES) == set(SAMPLE_TYPES)
    meta = {f.name for f in dataclasses.fields(Sample)}
    for name, cls in SAMPLE_CLASSES.items():
        fields = [f for f in dataclasses.fields(cls) if f.name not in meta]
        assert [f.name for f in fields] == [f.name for f in SAMPLE_TYPES[name]], name
        required = [f.default is dataclasses.MISSING for f in fields]
        assert required == [f.required for f in SAMPLE_TYPES[name]], name


def test_meta_fields_and_defaults() -> None:
    names = [f.name for f in dataclasses.fields(Sample)]
    assert names == ["__key__", "__restore_key__", "__subflavors__", "__sources__"]
    s = TextSample(__key__="k", __restore_key__=("Webdataset", 1), text="t")
    assert s.__subflavors__ is None and s.__sources__ is None
    with pytest.raises(TypeError):
        TextSample("k", ("x",), text="t")  # type: ignore[misc]  # keyword-only as in Energon


def test_derive_from_keeps_metadata() -> None:
    base = TextSample(
        __key__="k", __restore_key__=("W", 1), __subflavors__={"a": 1}, __sources__=(SRC,), text="t"
    )
    image = torch.zeros(3, 2, 2)
    derived = CaptioningSample.derive_from(base, image=image, caption="c")
    assert (derived.__key__, derived.__restore_key__) == ("k", ("W", 1))
    assert derived.__subflavors__ == {"a": 1} and derived.__sources__ == (SRC,)
    assert derived.caption == "c"
    renamed = TextSample.derive_from(base, __key__="other", text="x")
    assert renamed.__key__ == "other"


def test_from_joined_later_fields_win_and_sources_concatenate() -> None:
    src2 = dataclasses.replace(SRC, index=9)
    a = VQASample(
        __key__="a", __restore_key__=(), __sources__=(SRC,), image=torch.zeros(1), context="q"
    )
    b = TextSample(__key__="b", __restore_key__=(), __sources__=(src2,), text="t")

    @dataclasses.dataclass(slots=True, kw_only=True)
    class Joined(VQASample):
        text: str

    joined = Joined.from_joined(a, None, b)
    assert joined.__key__ == "a" and joined.text == "t" and joined.context == "q"
    assert joined.__sources__ == (SRC, src2)
    with pytest.raises(TypeError, match="by position"):
        Joined.from_joined(a, other=b)


def test_pin_memory_rebuilds_nested_structures() -> None:
    s = VQASample(__key__="k", __restore_key__=("W", 1), image=[1, (2, {"a": 3})], context="c")
    pinned = s.pin_memory()
    assert isinstance(pinned, VQASample) and pinned is not s and pinned == s


def test_field_map_nested_access_and_alternatives() -> None:
    cfg = config("VQASample", {"image": "jpg,png", "context": "json[q][1]", "answers": "json[a]"})
    decoded = {"png": torch.zeros(3, 1, 1), "json": {"q": ["x", "why?"], "a": ["yes"]}}
    s = build_sample(cfg, decoded, key="k", restore_key=("W", 0), sources=(SRC,))
    assert isinstance(s, VQASample)
    assert s.context == "why?" and s.answers == ["yes"] and s.image.shape == (3, 1, 1)
    assert s.__sources__ == (SRC,) and s.__restore_key__ == ("W", 0)


def test_field_map_first_alternative_wins() -> None:
    cfg = config("TextSample", {"text": "txt,json[t]"})
    s = build_sample(cfg, {"txt": "a", "json": {"t": "b"}}, key="k", restore_key=())
    assert isinstance(s, TextSample) and s.text == "a"


def test_field_map_missing_part_names_key_field_and_parts() -> None:
    cfg = config("CaptioningSample", {"image": "jpg,png", "caption": "txt"})
    with pytest.raises(SampleError) as info:
        build_sample(cfg, {"webp": 1, "txt": "c"}, key="s007", restore_key=())
    text = str(info.value)
    assert "s007" in text and "'image'" in text and "jpg" in text and "png" in text
    assert "webp" in text and "txt" in text


def test_field_map_bad_nested_access_is_a_sample_error() -> None:
    cfg = config("TextSample", {"text": "json[a][2]"})
    with pytest.raises(SampleError, match=r"json\[a\]\[2\]"):
        build_sample(cfg, {"json": {"a": [1]}}, key="k", restore_key=())


def test_subflavors_merge_metadataset_over_dataset_yaml() -> None:
    cfg = config("TextSample", {"text": "txt"}, subflavors={"a": 1, "b": 2})
    s = build_sample(cfg, {"txt": "x"}, key="k", restore_key=(), subflavors={"b": 3})
    assert s.__subflavors__ == {"a": 1, "b": 3}


def test_crude_sample_holds_parts_and_metadata() -> None:
    cfg = parse_dataset_config(
        {"__module__": "megatron.energon", "__class__": "CrudeWebdataset", "subflavors": {"x": 1}},
        "dataset.yaml",
    )
    s = build_sample(cfg, {"txt": "t", "json": {}}, key="k", restore_key=("W", 2), sources=(SRC,))
    assert isinstance(s, CrudeSample) and isinstance(s, dict)
    assert s == {
        "txt": "t",
        "json": {},
        "__key__": "k",
        "__restore_key__": ("W", 2),
        "__subflavors__": {"x": 1},
        "__sources__": (SRC,),
    }


LOADER = """
def sample_loader(raw):
    return {"text": raw["txt"].upper(), "__key__": "renamed-" + raw["__key__"]}

def part_filter(part):
    return part == "txt"
"""


@pytest.fixture
def loader_dataset(tmp_path: Path) -> Path:
    (tmp_path / ".nv-meta").mkdir()
    (tmp_path / ".nv-meta" / "sample_loader.py").write_text(LOADER)
    return tmp_path


def test_sample_loader_refused_without_opt_in(loader_dataset: Path) -> None:
    with pytest.raises(ConfigError, match="trust_sample_loader=True"):
        load_sample_loader(str(loader_dataset), "sample_loader.py:sample_loader", False)
    with pytest.raises(ConfigError, match="does not run it"):
        load_part_filter(str(loader_dataset), "sample_loader.py:part_filter", False)


def test_sample_loader_runs_with_opt_in(loader_dataset: Path) -> None:
    cfg = config(
        "TextSample",
        sample_loader="sample_loader.py:sample_loader",
        part_filter="sample_loader.py:part_filter",
    )
    assert cfg.sample_loader is not None
    loader = load_sample_loader(str(loader_dataset), cfg.sample_loader, allow_code=True)
    part_filter = load_part_filter(str(loader_dataset), cfg.part_filter, allow_code=True)
    assert part_filter is not None and part_filter("txt") and not part_filter("jpg")
    s = build_sample(cfg, {"txt": "hi"}, key="k", restore_key=(), sample_loader=loader)
    # a sample loader may rename the sample (Energon passes its __key__ through)
    assert isinstance(s, TextSample) and s.text == "HI" and s.__key__ == "renamed-k"


def test_sample_loader_config_without_loaded_loader_is_config_error() -> None:
    cfg = config("TextSample", sample_loader="sample_loader.py:f", part_filter=["txt"])
    with pytest.raises(ConfigError, match="load_sample_loader"):
        build_sample(cfg, {"txt": "x"}, key="k", restore_key=())


def test_part_filter_list() -> None:
    part_filter = load_part_filter("/nowhere", ["jpg", "txt"], allow_code=False)
    assert part_filter is not None and part_filter("jpg") and not part_filter("json")


def test_fields_and_defaults_match_energon() -> None:
    pytest.importorskip("megatron.energon")
    import megatron.energon as energon
    from megatron.energon.flavors import vqa_and_ocr

    for name, cls in SAMPLE_CLASSES.items():
        their_cls = getattr(energon, name, None) or getattr(vqa_and_ocr, name)
        theirs = {f.name: f.default for f in dataclasses.fields(their_cls)}
        ours = {f.name: f.default for f in dataclasses.fields(cls)}
        assert ours == theirs, name
