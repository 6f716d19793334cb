"""``stoker info`` and ``stoker lint`` run as real processes: output and exit status."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset


def stoker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """6 shards of 5 samples, split 4,1,1."""
    root = tmp_path / "ds"
    root.mkdir()
    for s in range(6):
        with tarfile.open(root / f"part_{s:02d}.tar", "w") as tar:
            for i in range(5):
                for part in ("jpg", "txt"):
                    data = f"{s}/{i}/{part}".encode()
                    member = tarfile.TarInfo(f"p{s}_{i}.{part}")
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
    prepare_dataset(
        str(root),
        split_ratio=[("train", 4), ("val", 1), ("test", 1)],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        num_workers=1,
    )
    return root


def test_lint_clean_dataset_exits_0(dataset: Path) -> None:
    result = stoker("lint", str(dataset), "--num-workers", "2", "--no-decode")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "checked 6 shards, 30 samples: no problems"
    assert "Checking shards" in result.stderr  # the progress bar, on stderr


def test_lint_problems_exit_1(dataset: Path) -> None:
    (dataset / "part_03.tar").unlink()
    (dataset / ".nv-meta/split.yaml").write_text(
        "split_parts:\n  train: ['part_{00..05}.tar']\n  val: []\n"
    )
    result = stoker("lint", str(dataset), "--no-progress", "--no-decode")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "error: part_03.tar: the shard does not exist. Restore the shard, or remove it from "
        "the dataset and prepare again."
    )
    assert "warning: .nv-meta/split.yaml: split part 'val' has no shards." in lines
    assert lines[-1] == "checked 5 shards, 25 samples: 1 error, 1 warning"
    assert result.stderr == ""


def test_lint_warnings_only_exit_0(dataset: Path) -> None:
    (dataset / ".nv-meta/split.yaml").write_text("split_parts:\n  train: ['part_{00..04}.tar']\n")
    result = stoker("lint", str(dataset), "--no-progress", "--no-decode")
    assert result.returncode == 0
    assert "warning: part_05.tar: the shard is in no split part" in result.stdout
    assert result.stdout.splitlines()[-1].endswith(": 0 errors, 1 warning")


def test_lint_json(dataset: Path) -> None:
    idx = dataset / "part_01.tar.idx"
    idx.write_bytes(idx.read_bytes()[:-8])
    result = stoker("lint", str(dataset), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert (report["ok"], report["errors"], report["shards_checked"]) == (False, 1, 6)
    assert report["findings"][0]["path"] == "part_01.tar"
    assert "Checking shards" not in result.stderr


def test_lint_usage_errors_exit_2(tmp_path: Path) -> None:
    result = stoker("lint", str(tmp_path / "missing"))
    assert result.returncode == 2
    assert "no such folder" in result.stderr
    result = stoker("lint", str(tmp_path))
    assert result.returncode == 2
    assert "stoker prepare" in result.stderr


def test_lint_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"a": 2\n')
    (tmp_path / "t.jsonl.idx").write_bytes((0).to_bytes(8, "little"))
    result = stoker("lint", str(path))
    assert result.returncode == 1
    assert result.stdout.splitlines()[0].startswith(
        "error: t.jsonl, byte offset 9: line 2 is not valid JSON"
    )


def test_info_human_and_json(dataset: Path) -> None:
    result = stoker("info", str(dataset))
    assert result.returncode == 0, result.stderr
    assert "sample type   CaptioningSample" in result.stdout
    assert any(line.split() == ["train", "4", "20", "0"] for line in result.stdout.splitlines())
    data = json.loads(stoker("info", str(dataset), "--json").stdout)
    assert (data["samples"], data["shards"]) == (30, 6)


def test_info_not_prepared_exits_2(tmp_path: Path) -> None:
    result = stoker("info", str(tmp_path))
    assert result.returncode == 2
    assert "stoker prepare" in result.stderr


def test_cli_does_not_import_torch(dataset: Path) -> None:
    code = (
        "import sys\nfrom stoker.cli.main import cli\n"
        "try:\n    cli(['lint', sys.argv[1], '--no-progress', '--no-decode'])\n"
        "except SystemExit:\n    pass\n"
        "cli(['info', sys.argv[1]], standalone_mode=False)\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(dataset)], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines()[-1] == "False"
