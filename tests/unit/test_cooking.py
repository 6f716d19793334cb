"""Cookers: selection by subflavors, the ``cooker`` decorator, aux stores and the kitchen."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from stoker.errors import ConfigError, SampleError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.metadataset.nodes import AuxRef
from stoker.model.cache_pool import NoCachePool
from stoker.model.cooking import Cooker, basic_sample_keys, cooker, select_cooker
from stoker.model.samples import CrudeSample, SourceInfo, TextSample
from stoker.model.task import TaskEncoder
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.read import RawSample
from stoker.runtime.build import SampleBuilder
from stoker.sources.aux import (
    DecodeFileStore,
    PrimaryFileStore,
    SystemFileStore,
    WebdatasetFileStore,
)
from stoker.sources.load import load_source
from tests.conftest import write_shard


def cook_a(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text="a:" + sample["txt"])


def cook_b(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text="b:" + sample["txt"])


@cooker(need_primary=True)
def cook_primary(sample: dict[str, Any], primary: Any) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=primary.get(".txt", sample))


@cooker(need_cache=True)
def cook_lazy(sample: dict[str, Any], cache: Any) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=cache.to_cache("x", "name").get())


def test_cooker_decorator_marks_and_keeps_the_function() -> None:
    assert Cooker(cook_primary).need_primary and not Cooker(cook_primary).need_cache
    assert Cooker(cook_lazy).need_cache and not Cooker(cook_lazy).need_primary
    assert not Cooker(cook_a).need_primary and not Cooker(cook_a).need_cache
    assert cook_primary.__name__ == "cook_primary"
    bare = cooker(cook_a)  # @cooker without arguments
    assert bare({"__key__": "k", "__restore_key__": (), "txt": "t"}).text == "a:t"
    assert not Cooker(bare).need_primary
    assert pickle.loads(pickle.dumps(cook_primary)) is cook_primary  # spawned workers


@pytest.mark.parametrize(
    ("subflavors", "expected"),
    [
        ({"kind": "a"}, cook_a),
        ({"kind": "a", "lang": "en"}, cook_a),  # extra subflavors do not matter
        ({"kind": "b"}, cook_b),
        ({"kind": "c"}, cook_b),  # the catch-all, after the specific ones
        (None, cook_b),
    ],
)
def test_first_matching_cooker_wins(subflavors: dict[str, Any] | None, expected: Any) -> None:
    cookers = [
        Cooker(cook_a, has_subflavors={"kind": "a"}),
        Cooker(cook_b),
        Cooker(cook_a),  # never reached
    ]
    assert select_cooker(cookers, subflavors).cook is expected


def test_no_match_names_the_subflavors_and_the_conditions() -> None:
    cookers = [Cooker(cook_a, has_subflavors={"kind": "a"}), Cooker(cook_b, {"kind": "b"})]
    with pytest.raises(SampleError) as info:
        select_cooker(cookers, {"kind": "c"})
    text = str(info.value)
    assert "{'kind': 'c'}" in text
    assert "cook_a (has_subflavors={'kind': 'a'})" in text
    assert "cook_b (has_subflavors={'kind': 'b'})" in text
    assert not Cooker(cook_a, {"kind": "a"}).is_match({})  # a missing key never matches


def test_basic_sample_keys_forwards_metadata_and_extra_sources() -> None:
    extra = SourceInfo(dataset_path="aux", index="x.png", shard_name=None, file_names=("x.png",))
    crude = {"__key__": "k", "__restore_key__": ("r",), "__subflavors__": {}, "txt": "t"}
    keys = basic_sample_keys({**crude, "__sources__": None}, (extra,))
    assert keys == {**{k: v for k, v in crude.items() if k != "txt"}, "__sources__": (extra,)}


# --- aux stores -----------------------------------------------------------------------------------
def png(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 2), colour).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def image_dataset(tmp_path: Path) -> Path:
    samples = [
        (f"im_{i}", {"png": png((i * 10, 0, 0)), "txt": f"text {i}".encode()}) for i in range(5)
    ]
    write_shard(tmp_path / "ds" / "a_0.tar", samples[:2])
    write_shard(tmp_path / "ds" / "a_1.tar", samples[2:])
    prepare_dataset(
        str(tmp_path / "ds"),
        split_parts=[("train", "a_")],
        dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
    )
    return tmp_path / "ds"


def test_dataset_store_reads_members_raw_or_decoded(image_dataset: Path) -> None:
    store = WebdatasetFileStore(str(image_dataset))
    data, info = store["im_3.png"]
    assert data == png((30, 0, 0))
    assert info.shard_name == "a_1.tar" and info.file_names == ("im_3.png",)
    decoded = DecodeFileStore(store, decoder=SampleDecoder(image_decode="torchrgb8"))
    sample: dict[str, Any] = {"__sources__": None}
    assert decoded.get("im_4.png", sample)[:, 0, 0].tolist() == [40, 0, 0]
    assert decoded.get("im_0.txt") == "text 0"
    assert [s.index for s in sample["__sources__"]] == ["im_4.png"]
    for missing in ("im_9.png", "im_1.jpg", "noext"):
        with pytest.raises(SampleError, match=f"has no file '{missing}'") as err:
            store[missing]
        assert str(image_dataset) in str(err.value)


def test_folder_store_reads_files_and_refuses_escapes(tmp_path: Path) -> None:
    (tmp_path / "folder" / "sub").mkdir(parents=True)
    (tmp_path / "folder" / "sub" / "a.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text("no")
    store = SystemFileStore(str(tmp_path / "folder"))
    assert store.get("sub/a.txt") == b"hello"
    assert DecodeFileStore(store, decoder=SampleDecoder()).get("sub/a.txt") == "hello"
    for name in ("sub/b.txt", "../secret.txt", str(tmp_path / "secret.txt")):
        with pytest.raises(SampleError, match="has no file"):
            store[name]


def test_primary_store_prefixes_dotted_names(image_dataset: Path) -> None:
    store = PrimaryFileStore(WebdatasetFileStore(str(image_dataset)), "im_2")
    assert store.get(".txt") == b"text 2"
    assert store.get("im_1.txt") == b"text 1"


def test_dataset_store_needs_a_prepared_dataset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"index\.sqlite"):
        WebdatasetFileStore(str(tmp_path))


def test_no_cache_pool_defers_reads(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("later")
    store, pool = SystemFileStore(str(tmp_path)), NoCachePool()
    lazy = pool.get_lazy(store, "f.txt")
    (tmp_path / "f.txt").write_text("changed")
    sample: dict[str, Any] = {}
    assert lazy.get(sample) == b"changed" and sample["__sources__"][0].index == "f.txt"
    assert pool.get(store, "f.txt") == b"changed"


# --- cooking inside SampleBuilder -----------------------------------------------------------------
class Encoder(TaskEncoder[Any, Any, Any, Any]):
    cookers = (
        Cooker(cook_primary, has_subflavors={"via": "primary"}),
        Cooker(cook_lazy, has_subflavors={"via": "cache"}),
        Cooker(cook_a, has_subflavors={"via": "parts"}),
    )


def build(source: Any, key: str, parts: dict[str, bytes], encoder: Any = None) -> Any:
    builder = SampleBuilder(source, SampleDecoder(), encoder or Encoder())
    return builder.build(RawSample(key, parts, "a_0.tar", 0, 0), ref=0)


@pytest.mark.parametrize(
    ("via", "text"), [("primary", "text 1"), ("cache", "x"), ("parts", "a:given")]
)
def test_builder_cooks_crude_samples(image_dataset: Path, via: str, text: str) -> None:
    source = load_source(str(image_dataset), subflavors={"via": via})
    sample = build(source, "im_1", {"txt": b"given"})
    assert isinstance(sample, TextSample)
    assert (sample.text, sample.__key__, sample.__subflavors__) == (text, "im_1", {"via": via})


def test_builder_without_cookers_keeps_crude_samples(image_dataset: Path) -> None:
    source = load_source(str(image_dataset))
    sample = build(source, "im_1", {"txt": b"given"}, TaskEncoder())
    assert isinstance(sample, CrudeSample) and sample["txt"] == "given"


def test_builder_errors_name_the_sample(image_dataset: Path) -> None:
    with pytest.raises(SampleError, match="no cooker matches") as info:
        build(load_source(str(image_dataset), subflavors={"via": "x"}), "im_1", {})
    assert info.value.key == "im_1"
    with pytest.raises(SampleError, match="cook failed with KeyError") as info:
        build(load_source(str(image_dataset), subflavors={"via": "parts"}), "im_1", {})
    assert info.value.key == "im_1"


def test_jsonl_primary_store_reads_lines_by_number(tmp_path: Path) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps({"i": i}) + "\n" for i in range(3)))
    prepare_jsonl(str(path))

    @cooker(need_primary=True)
    def cook_line(sample: dict[str, Any], primary: Any) -> TextSample:
        text = f"{primary.get('.json')['i']}/{primary.get('0.json')['i']}"
        return TextSample(**basic_sample_keys(sample), text=text)

    class LineEncoder(TaskEncoder[Any, Any, Any, Any]):
        cookers = (Cooker(cook_line),)

    source = load_source(str(path))
    sample = build(source, "2", {"json": b'{"i": 2}'}, LineEncoder())
    assert sample.text == "2/0"


def test_aux_refs_reach_the_cooker(image_dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "n.txt").write_text("from folder")

    def cook_both(sample: dict[str, Any], images: Any, files: Any) -> TextSample:
        text = f"{images.get('im_0.txt')}|{files.get('n.txt')}"
        return TextSample(**basic_sample_keys(sample), text=text)

    class AuxEncoder(TaskEncoder[Any, Any, Any, Any]):
        cookers = (Cooker(cook_both),)

    aux = {"images": AuxRef(str(image_dataset)), "files": AuxRef(str(tmp_path / "files"), True)}
    source = dataclasses.replace(load_source(str(image_dataset)), aux=aux)
    assert build(source, "im_1", {}, AuxEncoder()).text == "text 0|from folder"
