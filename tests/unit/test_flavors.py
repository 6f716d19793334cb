"""The dataset.yaml forms of the factories and the allow-list of classes (DESIGN §6)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stoker import CrudeWebdataset, Sample, StandardWebdatasetFactory, TextSample
from stoker.errors import ConfigError
from stoker.format.dataset_config import module_allowed, parse_dataset_config
from stoker.sources.allow import resolve_class
from stoker.sources.field_map import build_sample

TEXT = {"__module__": "megatron.energon", "__class__": "TextSample"}


def test_factory_class_form_keeps_its_arguments() -> None:
    raw = {
        "__module__": "acme_not_installed.data.energon",
        "__class__": "ChatMLWebdataset",
        "field_map": {"imgs": "jpgs", "conversation": "json"},
        "subflavors": {"a": 1},
        "split_config": "split2.yaml",
        "image_decode_spec": "torchrgb",
    }
    # a module that is not installed must be allowed explicitly
    with pytest.raises(ConfigError, match="not installed and not allowed"):
        parse_dataset_config(raw, "ds/.nv-meta/dataset.yaml")
    cfg = parse_dataset_config(raw, "x", allowed_modules=("acme_not_installed",))
    assert cfg.factory is not None and not cfg.is_crude
    assert cfg.factory.name == "acme_not_installed.data.energon:ChatMLWebdataset"
    assert cfg.factory.kwargs["image_decode_spec"] == "torchrgb"
    assert "split_config" not in cfg.factory.kwargs and cfg.split_config == "split2.yaml"
    assert cfg.subflavors == {"a": 1}


def test_split_config_key_and_its_type() -> None:
    raw = {"sample_type": TEXT, "field_map": {"text": "txt"}, "split_config": "split2.yaml"}
    assert parse_dataset_config(raw, "x").split_config == "split2.yaml"
    with pytest.raises(ConfigError, match="'split_config' must be a file name"):
        parse_dataset_config({**raw, "split_config": ["a"]}, "x")


def test_module_allowed_by_argument_env_and_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOKER_ALLOWED_MODULES", raising=False)
    assert module_allowed("megatron.energon") and module_allowed("stoker")
    assert not module_allowed("mypkg.types")
    assert module_allowed("mypkg.types", ("mypkg",))
    assert not module_allowed("mypkgx.types", ("mypkg",))  # a prefix must end at a dot
    monkeypatch.setenv("STOKER_ALLOWED_MODULES", " other , mypkg.types")
    assert module_allowed("mypkg.types") and not module_allowed("mypkg")


def test_resolve_class_allow_list() -> None:
    assert resolve_class("megatron.energon", "CrudeWebdataset", where="x") is CrudeWebdataset
    assert resolve_class("stoker", "TextSample", where="x") is TextSample
    with pytest.raises(ConfigError, match="no sample type or dataset class 'get_loader'"):
        resolve_class("stoker", "get_loader", where="x")
    found = resolve_class("stoker.flavors.generic", "StandardWebdatasetFactory", where="x")
    assert found is StandardWebdatasetFactory
    with pytest.raises(ConfigError, match=r"os\.path\.join, which is neither") as e:
        resolve_class("os.path", "join", where="ds/.nv-meta/dataset.yaml")
    assert "allowed_modules=('os.path',)" in str(e.value)
    assert resolve_class("os.path", "join", where="x", allowed=("os",)) is not None
    with pytest.raises(ConfigError, match="has no 'Nope'"):
        resolve_class("stoker.model.samples", "Nope", where="x")


@pytest.mark.parametrize(
    "name",
    [
        "CaptioningWebdataset",
        "ImageClassificationWebdataset",
        "VQAOCRWebdataset",
        "VidQAWebdataset",
    ],
)
def test_deprecated_typed_factories_are_module_level_classes(name: str) -> None:
    import pickle

    import stoker
    from stoker.flavors import typed

    cls = getattr(typed, name)
    assert (cls.__name__, cls.__qualname__, cls.__module__) == (name, name, "stoker.flavors.typed")
    sample_name = name.removesuffix("Webdataset") + "Sample"
    assert cls.__sample_type__ is getattr(stoker, sample_name)
    assert cls.__doc__ is not None and sample_name in cls.__doc__
    assert pickle.loads(pickle.dumps(cls)) is cls
    assert resolve_class("megatron.energon", name, where="x") is cls


def test_module_in_the_data_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "evil_types_in_data.py").write_text(
        "raise RuntimeError('code from the data folder ran')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="imported from the data folder"):
        resolve_class("evil_types_in_data", "X", where="x", data_root=str(tmp_path))
    assert "evil_types_in_data" not in sys.modules


def test_sample_loader_key_renames_and_other_meta_is_kept() -> None:
    cfg = parse_dataset_config(
        {"sample_type": TEXT, "sample_loader": "l.py:f", "part_filter": ["txt"]}, "x"
    )

    def loader(raw: dict[str, object]) -> dict[str, object]:
        return {"text": "t", "__key__": f"new-{raw['__key__']}", "__restore_key__": ("bad",)}

    sample = build_sample(cfg, {"txt": "t"}, key="k", restore_key=("ok",), sample_loader=loader)
    assert isinstance(sample, Sample)
    assert sample.__key__ == "new-k" and sample.__restore_key__ == ("ok",)
