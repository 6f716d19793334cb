"""``dataset_info`` and ``stoker info`` on prepared folders and JSONL files."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from stoker.cli.info import command
from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.info import SplitInfo, dataset_info
from stoker.format.jsonl import index_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.format.tar_index import encode_offsets

FIELD_MAP = {"image": "jpg", "caption": "txt"}


def write_shard(path: Path, keys: list[str]) -> None:
    with tarfile.open(path, "w") as tar:
        for key in keys:
            for part in ("jpg", "txt"):
                data = f"{key}.{part}".encode()
                member = tarfile.TarInfo(f"{key}.{part}")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """10 shards of 3 samples, split 8,1,1, with a CaptioningSample dataset.yaml."""
    root = tmp_path / "ds"
    root.mkdir()
    for s in range(10):
        write_shard(root / f"shard_{s:03d}.tar", [f"s{s}_{i}" for i in range(3)])
    prepare_dataset(
        str(root),
        split_ratio="8,1,1",
        dataset_yaml=make_dataset_yaml("CaptioningSample", FIELD_MAP),
        num_workers=1,
    )
    return root


def write_jsonl(path: Path, lines: list[str]) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(data)
    path.with_name(path.name + ".idx").write_bytes(encode_offsets(index_jsonl(data, str(path))))


def test_info_of_prepared_dataset(dataset: Path) -> None:
    report = dataset_info(str(dataset))
    assert (report.kind, report.samples, report.shards) == ("webdataset", 30, 10)
    assert report.bytes == sum(p.stat().st_size for p in dataset.glob("*.tar"))
    assert report.writer == "stoker"
    assert report.has_sqlite_index
    assert report.index_uuid == (dataset / ".nv-meta/index.uuid").read_text().strip()
    assert report.sample_type == "CaptioningSample"
    assert report.field_map == FIELD_MAP
    assert report.splits == [
        SplitInfo("train", 8, 24, 0),
        SplitInfo("val", 1, 3, 0),
        SplitInfo("test", 1, 3, 0),
    ]


def test_info_counts_excluded_shards_and_samples(dataset: Path) -> None:
    split_path = dataset / ".nv-meta/split.yaml"
    split = yaml.safe_load(split_path.read_text())
    split["exclude"] = ["shard_000.tar", "shard_001.tar/s1_0", "shard_001.tar/s1_2"]
    split_path.write_text(yaml.safe_dump(split, sort_keys=False))
    train = dataset_info(str(dataset)).splits[0]
    assert train == SplitInfo("train", 7, 7 * 3 - 2, 2)


def test_info_crude_dataset_and_subflavors(dataset: Path) -> None:
    (dataset / ".nv-meta/dataset.yaml").write_text(
        yaml.safe_dump(
            {
                "__module__": "megatron.energon",
                "__class__": "CrudeWebdataset",
                "subflavors": {"source": "web"},
            }
        )
    )
    report = dataset_info(str(dataset))
    assert (report.sample_type, report.field_map) == ("crude", None)
    assert report.subflavors == {"source": "web"}


def test_info_other_split_config(dataset: Path) -> None:
    (dataset / ".nv-meta/small.yaml").write_text(
        yaml.safe_dump({"split_parts": {"train": ["shard_{000..001}.tar"]}})
    )
    assert dataset_info(str(dataset), split_config="small.yaml").splits == [
        SplitInfo("train", 2, 6, 0)
    ]


def test_info_of_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "texts.jsonl"
    write_jsonl(path, [json.dumps({"text": f"line {i}"}) for i in range(7)])
    report = dataset_info(str(path))
    assert (report.kind, report.samples, report.bytes) == ("jsonl", 7, path.stat().st_size)


def test_info_of_unprepared_jsonl_says_to_prepare(tmp_path: Path) -> None:
    path = tmp_path / "texts.jsonl"
    path.write_text('{"text": "a"}\n')
    with pytest.raises(StorageError, match="not prepared") as info:
        dataset_info(str(path))
    assert info.value.hint is not None
    assert "stoker prepare" in info.value.hint


def test_info_of_unprepared_folder_says_to_prepare(tmp_path: Path) -> None:
    write_shard(tmp_path / "a.tar", ["k0"])
    with pytest.raises(StorageError) as info:
        dataset_info(str(tmp_path))
    assert info.value.hint is not None
    assert "stoker prepare" in info.value.hint


def test_info_of_missing_path(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such folder"):
        dataset_info(str(tmp_path / "nope"))


def test_info_split_naming_unknown_shard(dataset: Path) -> None:
    (dataset / ".nv-meta/split.yaml").write_text(
        yaml.safe_dump({"split_parts": {"train": ["gone.tar"]}})
    )
    with pytest.raises(FormatError, match=r"'gone\.tar'") as info:
        dataset_info(str(dataset))
    assert info.value.hint is not None
    assert "stoker lint" in info.value.hint


def test_info_dataset_yaml_not_a_mapping(dataset: Path) -> None:
    (dataset / ".nv-meta/dataset.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        dataset_info(str(dataset))


def test_cli_info_human(dataset: Path) -> None:
    result = CliRunner().invoke(command, [str(dataset)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["dataset", str(dataset)]
    assert "samples       30" in result.output
    assert "in 10 shards" in result.output
    assert "field map     image: jpg, caption: txt" in result.output
    train = next(line for line in lines if line.startswith("train"))
    assert train.split() == ["train", "8", "24", "0"]
    column = len("index.sqlite") + 2  # values start in one column after the longest label
    assert all(line[column - 2 : column] == "  " for line in lines[:8])
    assert all(line[column] != " " for line in lines[:8])


def test_cli_info_json(dataset: Path) -> None:
    result = CliRunner().invoke(command, [str(dataset), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["samples"] == 30
    assert data["sample_type"] == "CaptioningSample"
    assert [s["samples"] for s in data["splits"]] == [24, 3, 3]


def test_cli_info_error_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [str(tmp_path)])
    assert result.exit_code == 2
    assert "stoker prepare" in result.output


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"sample_type": {"__module__": "my.types", "__class__": "Painting"}}, "my.types.Painting"),
        (
            {"__module__": "megatron.energon", "__class__": "CaptioningWebdataset"},
            "CaptioningSample",
        ),
        ({"subflavors": {"a": 1}}, None),
    ],
)
def test_info_sample_type_as_written(dataset: Path, raw: dict[str, object], expected: str) -> None:
    (dataset / ".nv-meta/dataset.yaml").write_text(yaml.safe_dump(raw))
    assert dataset_info(str(dataset)).sample_type == expected


def test_cli_info_names_energon_as_writer(dataset: Path) -> None:
    path = dataset / ".nv-meta/.info.json"
    info = json.loads(path.read_text())
    path.write_text(json.dumps({**info, "energon_version": "7.4.1"}))
    result = CliRunner().invoke(command, [str(dataset)])
    assert "prepared by   megatron-energon 7.4.1" in result.output


def test_info_split_with_unbalanced_braces(dataset: Path) -> None:
    (dataset / ".nv-meta/split.yaml").write_text("split_parts:\n  train: ['shard_{000..003.tar']\n")
    with pytest.raises(ConfigError, match="invalid brace pattern"):
        dataset_info(str(dataset))
