"""``lint_dataset``: a clean dataset passes; each kind of defect gives a finding that names it."""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
import tarfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from stoker.errors import StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import index_jsonl
from stoker.format.lint import MAX_REPORTED, Finding, LintReport, lint_dataset
from stoker.format.lint import jsonl as lint_jsonl_module
from stoker.format.prepare import prepare_dataset
from stoker.format.tar_index import encode_offsets

SHARDS, PER_SHARD = 4, 3
#: Two members of 1 header + 1 data block each.
SAMPLE_BYTES = 4 * 512


def write_shard(path: Path, keys: list[str], parts: tuple[str, ...] = ("jpg", "txt")) -> None:
    with tarfile.open(path, "w") as tar:
        for key in keys:
            for part in parts:
                data = f"{key}.{part}".encode()
                member = tarfile.TarInfo(f"{key}.{part}")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))


def shard_keys(s: int, n: int = PER_SHARD) -> list[str]:
    return [f"s{s}_{i}" for i in range(n)]


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """4 shards of 3 samples, all in train, with a CaptioningSample dataset.yaml."""
    root = tmp_path / "ds"
    root.mkdir()
    for s in range(SHARDS):
        write_shard(root / f"shard_{s:03d}.tar", shard_keys(s))
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1.0)],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        num_workers=1,
    )
    return root


def lint(root: Path, **kwargs: object) -> LintReport:
    return lint_dataset(str(root), num_workers=1, **kwargs)  # type: ignore[arg-type]


def only_error(report: LintReport) -> Finding:
    errors = [f for f in report.findings if f.severity == "error"]
    assert len(errors) == 1, [f.message for f in report.findings]
    assert not report.ok
    return errors[0]


def edit_index(root: Path, shard: str, edit: object) -> None:
    path = root / f"{shard}.idx"
    offsets = np.frombuffer(path.read_bytes(), dtype="<u8").copy()
    path.write_bytes(encode_offsets(edit(offsets)))  # type: ignore[operator]


def write_meta(root: Path, name: str, data: object) -> None:
    (root / ".nv-meta" / name).write_text(yaml.safe_dump(data, sort_keys=False))


# -- clean --------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [1, 3])
def test_clean_dataset_is_ok(dataset: Path, num_workers: int) -> None:
    report = lint_dataset(str(dataset), num_workers=num_workers)
    assert report.ok
    assert report.findings == []
    assert (report.shards_checked, report.samples_checked) == (SHARDS, SHARDS * PER_SHARD)
    assert report.to_dict()["ok"] is True


def test_progress_bar_goes_to_stderr(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lint_dataset(str(dataset), num_workers=1, progress=True)
    captured = capsys.readouterr()
    assert "Checking shards" in captured.err
    assert captured.out == ""


def test_not_a_dataset_raises(tmp_path: Path) -> None:
    write_shard(tmp_path / "a.tar", ["k"])
    with pytest.raises(StorageError, match="not a prepared dataset") as info:
        lint(tmp_path)
    assert info.value.hint is not None
    assert "stoker prepare" in info.value.hint
    with pytest.raises(StorageError, match="no such folder"):
        lint(tmp_path / "missing")


def test_invalid_info_file(dataset: Path) -> None:
    (dataset / ".nv-meta/.info.json").write_text('{"shard_counts": {"shard_000.tar": -1}}')
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/.info.json"
    assert "invalid sample count" in finding.problem


# -- tar index ----------------------------------------------------------------------------------


def test_index_with_wrong_length(dataset: Path) -> None:
    edit_index(dataset, "shard_002.tar", lambda o: o[:-1])
    finding = only_error(lint(dataset))
    assert finding.path == "shard_002.tar"
    assert "shard_002.tar.idx" in finding.problem
    assert f"expected {PER_SHARD + 1} entries" in finding.problem
    assert finding.hint is not None
    assert "--tar-index-only" in finding.hint


def test_index_offset_off_block_boundary(dataset: Path) -> None:
    def shift(o: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        o[1] += 1
        return o

    edit_index(dataset, "shard_001.tar", shift)
    finding = only_error(lint(dataset))
    assert (finding.path, finding.key, finding.offset) == (
        "shard_001.tar",
        "s1_1",
        SAMPLE_BYTES + 1,
    )
    assert "512-byte" in finding.problem


def test_index_offset_past_end(dataset: Path) -> None:
    size = (dataset / "shard_003.tar").stat().st_size

    def past_end(o: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        o[-1] = size + 512
        return o

    edit_index(dataset, "shard_003.tar", past_end)
    finding = only_error(lint(dataset))
    assert (finding.path, finding.offset) == ("shard_003.tar", size + 512)
    assert f"past the end ({size} bytes)" in finding.problem


def test_index_not_increasing(dataset: Path) -> None:
    edit_index(dataset, "shard_000.tar", lambda o: o[[0, 2, 1, 3]])
    finding = only_error(lint(dataset))
    assert (finding.path, finding.key, finding.offset) == ("shard_000.tar", "s0_2", SAMPLE_BYTES)
    assert "entry 2" in finding.problem
    assert "not greater" in finding.problem


def test_index_disagrees_with_scan(dataset: Path) -> None:
    def shift(o: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        o[2] += 512  # still increasing and on a block boundary, but wrong
        return o

    edit_index(dataset, "shard_001.tar", shift)
    finding = only_error(lint(dataset))
    assert (finding.path, finding.key, finding.offset) == (
        "shard_001.tar",
        "s1_2",
        2 * SAMPLE_BYTES,
    )
    assert f"entry 2 is {2 * SAMPLE_BYTES + 512}" in finding.problem


def test_index_missing(dataset: Path) -> None:
    (dataset / "shard_001.tar.idx").unlink()
    finding = only_error(lint(dataset))
    assert finding.path == "shard_001.tar"
    assert "missing" in finding.problem


# -- shards -------------------------------------------------------------------------------------


def test_shard_missing(dataset: Path) -> None:
    (dataset / "shard_002.tar").unlink()
    report = lint(dataset)
    finding = only_error(report)
    assert finding.path == "shard_002.tar"
    assert "does not exist" in finding.problem
    assert report.shards_checked == SHARDS - 1


def test_truncated_shard(dataset: Path) -> None:
    path = dataset / "shard_001.tar"
    path.write_bytes(path.read_bytes()[: SAMPLE_BYTES + 300])
    report = lint(dataset)
    truncated = [f for f in report.findings if "truncated" in f.problem]
    assert len(truncated) == 1
    assert (truncated[0].path, truncated[0].offset) == ("shard_001.tar", SAMPLE_BYTES)
    assert not report.ok
    assert report.shards_checked == SHARDS - 1


def test_gzipped_shard(dataset: Path) -> None:
    path = dataset / "shard_000.tar"
    path.write_bytes(gzip.compress(path.read_bytes()))
    report = lint(dataset)
    gz = [f for f in report.findings if "gzip" in f.problem]
    assert len(gz) == 1
    assert gz[0].path == "shard_000.tar"
    assert not report.ok


def test_shard_with_other_sample_count(dataset: Path) -> None:
    write_shard(dataset / "shard_003.tar", shard_keys(3, PER_SHARD + 1))
    report = lint(dataset)
    problems = [f.problem for f in report.findings if f.path == "shard_003.tar"]
    assert f"the shard has {PER_SHARD + 1} samples but .info.json says {PER_SHARD}." in problems
    assert any("lists 3 samples but the file has 4" in p for p in problems)


def test_duplicate_keys_across_shards(dataset: Path) -> None:
    write_shard(dataset / "shard_002.tar", shard_keys(0))  # same sizes: the index stays right
    report = lint(dataset)
    duplicates = [f for f in report.findings if "duplicate" in f.problem]
    assert [f.key for f in duplicates] == shard_keys(0)
    first = duplicates[0]
    assert (first.path, first.offset) == ("shard_002.tar", 0)
    assert "also occurs in shard 'shard_000.tar'" in first.problem
    assert first.message.startswith("shard_002.tar, sample 's0_0', byte offset 0: duplicate")


def test_many_duplicates_are_capped(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    root.mkdir()
    keys = [f"k{i:03d}" for i in range(MAX_REPORTED + 5)]
    write_shard(root / "a.tar", keys)
    write_shard(root / "b.tar", [f"x{i:03d}" for i in range(MAX_REPORTED + 5)])
    prepare_dataset(str(root), split_ratio=[("train", 1.0)], num_workers=1)
    write_shard(root / "b.tar", keys)
    report = lint(root)
    duplicates = [f for f in report.findings if "duplicate" in f.problem]
    assert len(duplicates) == MAX_REPORTED + 1
    assert duplicates[-1].problem == "... and 5 more duplicate keys (not listed)."


def test_sqlite_count_mismatch(dataset: Path) -> None:
    db = sqlite3.connect(dataset / ".nv-meta/index.sqlite")
    db.execute("DELETE FROM samples WHERE tar_file_id = 1 AND sample_index = 0")
    db.commit()
    db.close()
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/index.sqlite"
    assert "'shard_001.tar'" in finding.problem
    assert f"says {PER_SHARD}" in finding.problem


def test_sqlite_unreadable(dataset: Path) -> None:
    (dataset / ".nv-meta/index.sqlite").write_bytes(b"not a database" * 100)
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/index.sqlite"
    assert "cannot be read" in finding.problem


# -- split.yaml ---------------------------------------------------------------------------------


def test_split_naming_missing_shard(dataset: Path) -> None:
    write_meta(dataset, "split.yaml", {"split_parts": {"train": ["shard_{000..004}.tar"]}})
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/split.yaml"
    assert "'shard_004.tar'" in finding.problem
    assert "'train'" in finding.problem


def test_split_warnings_leave_the_dataset_ok(dataset: Path) -> None:
    write_meta(
        dataset,
        "split.yaml",
        {
            "split_parts": {"train": ["shard_{000..002}.tar"], "val": ["shard_001.tar"]},
            "exclude": ["shard_001.tar", "nope.tar", "shard_000.tar/s0_9", "shard_000.tar/s0_1"],
        },
    )
    report = lint(dataset)
    assert report.ok
    problems = sorted(f.problem for f in report.findings)
    assert all(f.severity == "warning" for f in report.findings)
    assert problems == [
        "exclude names sample 's0_9', which shard 'shard_000.tar' does not have.",
        "exclude names unknown shard 'nope.tar'.",
        "split part 'val' has no shards.",
        "the shard is in no split part, so it is never loaded.",
    ]
    assert [f.path for f in report.findings if "no split" in f.problem] == ["shard_003.tar"]


def test_invalid_split_yaml(dataset: Path) -> None:
    write_meta(dataset, "split.yaml", {"split_parts": {"train": ["shard_000.tar"]}, "foo": 1})
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/split.yaml"
    assert "unknown key(s) foo" in finding.problem


def test_other_split_config_missing(dataset: Path) -> None:
    finding = only_error(lint(dataset, split_config="nope.yaml"))
    assert "'nope.yaml' not found" in finding.problem


# -- dataset.yaml -------------------------------------------------------------------------------


def _dataset_yaml(**extra: object) -> dict[str, object]:
    raw = make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"})
    return {**raw, **extra}


def test_dataset_yaml_unknown_key(dataset: Path) -> None:
    write_meta(dataset, "dataset.yaml", _dataset_yaml(colour="blue"))
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/dataset.yaml"
    assert "unknown key 'colour'" in finding.problem


def test_dataset_yaml_unknown_sample_type(dataset: Path) -> None:
    raw = _dataset_yaml(sample_type={"__module__": "stoker", "__class__": "PaintingSample"})
    write_meta(dataset, "dataset.yaml", raw)
    finding = only_error(lint(dataset))
    assert "unknown sample type 'PaintingSample'" in finding.problem


def test_field_map_naming_missing_part(dataset: Path) -> None:
    write_meta(dataset, "dataset.yaml", _dataset_yaml(field_map={"image": "png", "caption": "txt"}))
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/dataset.yaml"
    assert "field 'image' reads part 'png'" in finding.problem
    assert finding.hint == "Parts found in the shards: jpg, txt."


def test_field_map_alternatives_need_one_part(dataset: Path) -> None:
    field_map = {"image": "png,jpg", "caption": "json[caption],txt"}
    write_meta(dataset, "dataset.yaml", _dataset_yaml(field_map=field_map))
    assert lint(dataset).findings == []


def test_other_dataset_yaml_missing(dataset: Path) -> None:
    finding = only_error(lint(dataset, dataset_yaml="other.yaml"))
    assert "other.yaml does not exist" in finding.problem


# -- JSONL --------------------------------------------------------------------------------------


def write_jsonl(path: Path, lines: list[str]) -> bytes:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(data)
    path.with_name(path.name + ".idx").write_bytes(encode_offsets(index_jsonl(data, str(path))))
    return data


LINES = [json.dumps({"text": f"sample {i}"}) for i in range(5)]


def test_clean_jsonl(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "t.jsonl", LINES)
    report = lint_dataset(str(tmp_path / "t.jsonl"))
    assert (report.ok, report.findings, report.kind) == (True, [], "jsonl")
    assert report.samples_checked == len(LINES)


def test_a_large_jsonl_file_is_checked_in_parts_with_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ~3 MiB checked in parts of ~1 MiB over two processes: the same findings (line numbers,
    # offsets, the count of those not listed) as one part in this process.
    lines = [json.dumps({"text": "x" * 100, "i": i}) for i in range(25_000)]
    for i in range(0, 25_000, 900):  # 28 bad lines, some in each part
        lines[i] = "[1, 2]" if (i // 900) % 2 else '{"broken": '
    (tmp_path / "t.jsonl").write_bytes(data := "".join(x + "\n" for x in lines).encode())
    whole = lint_dataset(str(tmp_path / "t.jsonl"), num_workers=1)
    monkeypatch.setattr(lint_jsonl_module, "PART_BYTES", 1 << 20)
    monkeypatch.setenv("STOKER_PROGRESS_INTERVAL", "0")
    capsys.readouterr()
    parted = lint_dataset(str(tmp_path / "t.jsonl"), num_workers=2, progress=True)
    assert parted.findings == whole.findings and parted.samples_checked == 25_000
    assert [f.problem for f in parted.findings[:2]] == [
        "line 1 is not valid JSON: Expecting value (column 11).",
        "line 901 is not a JSON object.",
    ]
    assert parted.findings[1].offset == data.index(b"[1, 2]")
    assert parted.findings[-1].problem == "... and 8 more bad lines (not listed)."
    shown = capsys.readouterr().err.splitlines()
    assert len(shown) >= 3 and all(line.startswith("Checking lines: ") for line in shown)
    assert shown[-1].startswith("Checking lines: 3/3 (100%)") and "done in" in shown[-1]


def test_jsonl_index_stale(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl(path, LINES)
    longer = [*LINES[:2], json.dumps({"text": "a much longer sample"}), *LINES[3:]]
    path.write_text("".join(line + "\n" for line in longer))
    finding = only_error(lint_dataset(str(path)))
    assert finding.path == "t.jsonl"
    assert "t.jsonl.idx entry 3 is " in finding.problem
    assert finding.hint is not None
    assert "stale" in finding.hint
    assert finding.offset == sum(len(line) + 1 for line in longer[:3])


def test_jsonl_index_missing_a_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    data = write_jsonl(path, LINES)
    path.write_bytes(data + b'{"text": "new"}\n')
    finding = only_error(lint_dataset(str(path)))
    assert finding.problem == "t.jsonl.idx lists 5 samples but the file has 6."
    assert "lists 5 samples" in finding.problem
    assert finding.offset == len(data)


def test_jsonl_index_missing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl(path, LINES)
    (tmp_path / "t.jsonl.idx").unlink()
    finding = only_error(lint_dataset(str(path)))
    assert "t.jsonl.idx is missing" in finding.problem
    assert finding.hint is not None
    assert "stoker prepare" in finding.hint


def test_jsonl_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [*LINES[:2], '{"text": oops}', "", "[1, 2]", *LINES[2:]]
    path.write_text("".join(line + "\n" for line in lines))
    report = lint_dataset(str(path))
    assert [(f.problem.split(" is ")[0], f.offset) for f in report.findings] == [
        ("line 3", sum(len(line) + 1 for line in lines[:2])),
        ("line 5", sum(len(line) + 1 for line in lines[:4])),
    ]
    assert "not valid JSON: Expecting value (column 10)" in report.findings[0].problem
    assert report.findings[1].problem == "line 5 is not a JSON object."
    assert report.samples_checked == len(lines) - 1


def test_jsonl_missing_file(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such file"):
        lint_dataset(str(tmp_path / "gone.jsonl"))


def test_split_with_unbalanced_braces(dataset: Path) -> None:
    write_meta(dataset, "split.yaml", {"split_parts": {"train": ["shard_{000..003.tar"]}})
    finding = only_error(lint(dataset))
    assert finding.path == ".nv-meta/split.yaml"
    assert finding.problem.startswith("invalid brace pattern")
