"""Meta files: split.yaml, info files, dataset.yaml, brace patterns, JSONL indexes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format import jsonl as jsonl_module
from stoker.format.brace import collapse, expand
from stoker.format.dataset_config import parse_dataset_config, parse_field_spec
from stoker.format.jsonl import index_jsonl, prepare_jsonl
from stoker.format.meta import read_info, read_split_config
from stoker.format.tar_index import decode_offsets
from stoker.storage import open_store


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s_", "a/b_", "x"]), st.integers(0, 130), st.sampled_from([1, 3])
        ),
        max_size=40,
    )
)
def test_collapse_expands_back(items: list[tuple[str, int, int]]) -> None:
    names = [f"{prefix}{number:0{width}d}.tar" for prefix, number, width in items]
    assert expand(collapse(names)) == names


def test_collapse_is_short_for_runs() -> None:
    names = [f"part_{i:06d}.tar" for i in range(1000)]
    assert collapse(names) == ["part_{000000..000999}.tar"]


def _meta(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / ".nv-meta").mkdir(exist_ok=True)
    (tmp_path / ".nv-meta" / name).write_text(text)
    return tmp_path


def test_split_yaml_expands_and_excludes(tmp_path: Path) -> None:
    _meta(
        tmp_path,
        "split.yaml",
        "split_parts:\n  train: ['s_{000..003}.tar']\n  val: [v.tar]\n"
        "exclude: ['s_001.tar', 's_002.tar/key7']\n",
    )
    split = read_split_config(open_store(str(tmp_path)))
    assert split.shards("train") == ["s_000.tar", "s_002.tar", "s_003.tar"]
    assert split.excluded_samples() == {"s_002.tar": {"key7"}}
    with pytest.raises(ConfigError, match="unknown split part 'tset'") as info:
        split.shards("tset")
    assert "train, val" in info.value.message


def test_split_json_fallback_and_alternative_config(tmp_path: Path) -> None:
    _meta(tmp_path, "split.json", '{"split_parts": {"train": ["a.tar"]}}')
    _meta(tmp_path, "other.yaml", "split_parts: {train: [b.tar]}\n")
    store = open_store(str(tmp_path))
    assert read_split_config(store).shards("train") == ["a.tar"]
    assert read_split_config(store, "other.yaml").shards("train") == ["b.tar"]
    with pytest.raises(StorageError, match=r"'missing\.yaml' not found"):
        read_split_config(store, "missing.yaml")


def test_invalid_yaml_names_file(tmp_path: Path) -> None:
    _meta(tmp_path, "split.yaml", "split_parts: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML") as info:
        read_split_config(open_store(str(tmp_path)))
    assert "split.yaml" in info.value.message


def test_legacy_info_yaml(tmp_path: Path) -> None:
    _meta(tmp_path, ".info.yaml", "shard_counts:\n  a.tar: 3\n  b.tar: 4\n")
    info = read_info(open_store(str(tmp_path)))
    assert info.shard_counts == {"a.tar": 3, "b.tar": 4} and info.total_samples == 7


def test_missing_info_says_prepare(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="stoker prepare"):
        read_info(open_store(str(tmp_path)))


CAPTION = {"__module__": "megatron.energon", "__class__": "CaptioningSample"}


def test_dataset_config_forms() -> None:
    config = parse_dataset_config(
        {"sample_type": CAPTION, "field_map": {"image": "jpg,png", "caption": "json[c][0]"}},
        "x",
    )
    assert config.sample_type == "CaptioningSample" and config.parts_used() == {
        "jpg",
        "png",
        "json",
    }
    crude = parse_dataset_config(
        {"__module__": "megatron.energon", "__class__": "CrudeWebdataset", "subflavors": {"a": 1}},
        "x",
    )
    assert crude.is_crude and crude.subflavors == {"a": 1}
    legacy = parse_dataset_config(
        {
            "__module__": "megatron.energon",
            "__class__": "CaptioningWebdataset",
            "field_map": {"image": "jpg", "caption": "txt"},
        },
        "x",
    )
    assert legacy.sample_type == "CaptioningSample"
    assert parse_field_spec("json[a][0]")[0].path == ("a", "0")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"sample_type": CAPTION, "field_map": {"image": "jpg", "caption": "txt"}, "extra": 1},
            "unknown key 'extra'",
        ),
        (
            {
                "sample_type": {"__module__": "stoker", "__class__": "CaptionSample"},
                "field_map": {"image": "jpg"},
            },
            "unknown sample type 'CaptionSample'",
        ),
        (
            {
                "sample_type": {"__module__": "evil.module", "__class__": "X"},
                "field_map": {"a": "b"},
            },
            "not allowed",
        ),
        ({"sample_type": CAPTION, "field_map": {"image": "jpg"}}, "lacks the required field"),
        (
            {"sample_type": CAPTION, "field_map": {"image": "jpg", "caption": "txt", "x": "y"}},
            "does not have",
        ),
        ({"sample_type": CAPTION, "sample_loader": "sample_loader.py:f"}, "needs a part_filter"),
        ({"field_map": {"a": "b"}}, "names no sample type"),
    ],
)
def test_dataset_config_errors(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_dataset_config(raw, "ds/.nv-meta/dataset.yaml")


def test_user_module_allowed_explicitly() -> None:
    raw = {"sample_type": {"__module__": "mine", "__class__": "X"}, "field_map": {"a": "b"}}
    assert parse_dataset_config(raw, "x", allowed_modules=("mine",)).sample_module == "mine"


def test_jsonl_index_layout(tmp_path: Path) -> None:
    text = b'\n{"a": 1}\n\n  {"b": 2}  \r\n{"c": 3}\n\n'
    path = tmp_path / "t.jsonl"
    path.write_bytes(text)
    # Energon's layout: first sample starts at 0, the others where their line starts, then size.
    assert index_jsonl(text, str(path)).tolist() == [0, 11, 25, len(text)]
    assert prepare_jsonl(str(path)) == (3, len(text))
    stored = decode_offsets((tmp_path / "t.jsonl.idx").read_bytes(), "idx")
    assert stored.tolist() == [0, 11, 25, len(text)]


def test_prepare_jsonl_reads_the_file_in_pieces_and_shows_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A JSONL file is indexed a piece at a time (never held whole), with progress in MiB.
    lines = [json.dumps({"i": i, "t": "x" * (i % 50)}) for i in range(60_000)]
    text = "\n\n".join(lines).encode()  # blank lines between, no final newline
    path = tmp_path / "t.jsonl"
    path.write_bytes(text)
    monkeypatch.setattr(jsonl_module, "CHUNK", 100_003)  # ~30 pieces, cut inside lines
    monkeypatch.setenv("STOKER_PROGRESS_INTERVAL", "0")
    assert prepare_jsonl(str(path), progress=True) == (60_000, len(text))
    stored = decode_offsets((tmp_path / "t.jsonl.idx").read_bytes(), "idx").tolist()
    assert stored == index_jsonl(text, str(path)).tolist() and len(stored) == 60_001
    assert [text[a:b].strip() for a, b in itertools.pairwise(stored[:4])] == [
        line.encode() for line in lines[:3]
    ]
    progress = capsys.readouterr().err.splitlines()
    assert len(progress) >= 20 and progress[-1].startswith("Indexing lines: 3/3 (100%)")
    assert "MiB/s" in progress[-1]


def test_a_bad_line_late_in_a_jsonl_file_leaves_the_old_index_and_no_partial_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(5000)))
    prepare_jsonl(str(path))
    old = (tmp_path / "t.jsonl.idx").read_bytes()
    with path.open("a") as f:
        f.write('{"i": 5000}\nnot json\n')
    monkeypatch.setattr(jsonl_module, "CHUNK", 4096)  # pieces of the index written before it fails
    with pytest.raises(FormatError, match="line 5002 is not a JSON object") as info:
        prepare_jsonl(str(path))
    assert info.value.offset == path.stat().st_size - len("not json\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl", "t.jsonl.idx"]
    assert (tmp_path / "t.jsonl.idx").read_bytes() == old


def test_jsonl_bad_line(tmp_path: Path) -> None:
    text = b'{"a": 1}\nnot json\n'
    with pytest.raises(FormatError, match="line 2 is not a JSON object") as info:
        index_jsonl(text, "t.jsonl")
    assert info.value.offset == 9
