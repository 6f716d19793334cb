"""Shard paths in ``.nv-meta`` stay inside the dataset folder unless allowed explicitly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker.errors import ConfigError
from stoker.format.meta import read_info, read_split_config
from stoker.format.paths import outside_paths_allowed, outside_reason
from stoker.storage import open_store


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a.tar", None),
        ("sub/dir/a.tar", None),
        ("a..b.tar", None),  # dots inside a name are fine
        ("../a.tar", "'..'"),
        ("sub/../../a.tar", "'..'"),
        ("sub\\..\\a.tar", "'..'"),
        ("/etc/a.tar", "an absolute path"),
        ("~/a.tar", "an absolute path"),
        ("C:/data/a.tar", "an absolute path"),
        ("s3://bucket/a.tar", "a URL"),
    ],
)
def test_outside_reason(name: str, reason: str | None) -> None:
    assert outside_reason(name) == reason


def test_env_default_and_explicit_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STOKER_ALLOW_OUTSIDE_PATHS", raising=False)
    assert not outside_paths_allowed()
    monkeypatch.setenv("STOKER_ALLOW_OUTSIDE_PATHS", "1")
    assert outside_paths_allowed()
    assert not outside_paths_allowed(False)  # the argument wins over the environment


def _meta(tmp_path: Path, shards: dict[str, int], split: list[str]) -> None:
    meta = tmp_path / ".nv-meta"
    meta.mkdir()
    (meta / ".info.json").write_text(json.dumps({"shard_counts": shards}))
    (meta / "split.yaml").write_text(json.dumps({"split_parts": {"train": split}}))


def test_split_yaml_naming_an_outside_shard(tmp_path: Path) -> None:
    _meta(tmp_path, {"a.tar": 1}, ["a.tar", "/data/other/b.tar"])
    store = open_store(str(tmp_path))
    assert list(read_info(store).shard_counts) == ["a.tar"]
    with pytest.raises(ConfigError, match=r"'/data/other/b\.tar' leads outside") as info:
        read_split_config(store)
    assert str(info.value.path).endswith("split.yaml")
    allowed = read_split_config(store, allow_outside_paths=True)
    assert allowed.shards("train") == ["a.tar", "/data/other/b.tar"]


def test_info_json_naming_an_outside_shard(tmp_path: Path) -> None:
    _meta(tmp_path, {"../x/a.tar": 1}, ["../x/a.tar"])
    store = open_store(str(tmp_path))
    with pytest.raises(ConfigError, match=r"leads outside the dataset folder \('\.\.'\)"):
        read_info(store)
    assert list(read_info(store, allow_outside_paths=True).shard_counts) == ["../x/a.tar"]


def test_exclude_entries_are_not_paths_to_read(tmp_path: Path) -> None:
    """An exclude entry never makes the loader read a file, so it is not refused."""
    _meta(tmp_path, {"a.tar": 1}, ["a.tar"])
    split = tmp_path / ".nv-meta/split.yaml"
    split.write_text(json.dumps({"split_parts": {"train": ["a.tar"]}, "exclude": ["../b.tar"]}))
    assert read_split_config(open_store(str(tmp_path))).exclude == ["../b.tar"]
