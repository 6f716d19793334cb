"""``stoker info`` and ``stoker lint`` on hostile metadata: an error message, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import make_dataset


def stoker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def prepared(tmp_path: Path) -> Path:
    root = make_dataset(tmp_path / "ds", shards=2, per_shard=3)
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1)],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
        num_workers=1,
    )
    return root


def huge_count(root: Path) -> bytes:
    raw = json.loads((root / ".nv-meta/.info.json").read_text())
    raw["shard_counts"]["shard_000.tar"] = 2**62
    return json.dumps(raw).encode()


CASES = [
    (".info.json", lambda root: b'{"shard_counts": {"\xff": 1}}', "not UTF-8"),
    ("dataset.yaml", lambda root: b"sample_type: \xff\n", "not UTF-8"),
    (".info.json", lambda root: b"[" * 100_000, "nested too deeply"),
    ("dataset.yaml", lambda root: b"[" * 100_000, "nested too deeply"),
    (".info.json", huge_count, "invalid sample count"),
]


@pytest.mark.parametrize("command", ["info", "lint"])
@pytest.mark.parametrize(("file", "make", "words"), CASES)
def test_cli_reports_hostile_metadata(
    prepared: Path, command: str, file: str, make: object, words: str
) -> None:
    content = make(prepared)  # type: ignore[operator]
    (prepared / ".nv-meta" / file).write_bytes(content)
    result = stoker(command, str(prepared))
    assert result.returncode != 0
    output = (
        result.stdout + result.stderr
    )  # lint lists problems on stdout, info errors go to stderr
    assert "Traceback" not in output
    assert words in output, output
    assert file in output
