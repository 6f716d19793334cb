"""Hostile CLI input gives a one-paragraph stoker error and exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from stoker.cli.main import cli
from tests.conftest import make_dataset, snapshot

STOKER = [sys.executable, "-m", "stoker.cli.main"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def assert_clean_error(result: Result, *needles: str) -> None:
    """Exit 2 through stoker's error path (not a raw exception), with every needle in the text."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "error: " in result.output
    for needle in needles:
        assert needle in result.output, result.output


@pytest.mark.parametrize("ratio", ["nan,1,1", "inf,1,1", "1e309,1,1", "1,-inf,1"])
def test_non_finite_split_ratio(dataset_dir: Path, ratio: str) -> None:
    before = snapshot(dataset_dir)
    result = invoke("prepare", str(dataset_dir), "--non-interactive", "--split-ratio", ratio)
    assert_clean_error(result, "finite number", ratio)
    assert snapshot(dataset_dir) == before


def test_conflicting_split_ratio(dataset_dir: Path, tmp_path: Path) -> None:
    result = invoke(
        "prepare", str(dataset_dir), "--non-interactive", "--split-ratio", "train=1,train=2"
    )
    assert_clean_error(result, "split train is given more than once")
    assert not (dataset_dir / ".nv-meta").exists()
    out = tmp_path / "packed"
    packed = invoke(
        "pack", str(dataset_dir), str(out), "--prepare", "--split-ratio", "train=1,train=2"
    )
    assert_clean_error(packed, "more than once")
    assert not out.exists()


def test_invalid_split_parts_regex(dataset_dir: Path, tmp_path: Path) -> None:
    result = invoke(
        "prepare", str(dataset_dir), "--non-interactive", "--split-parts", "train:shard_(0"
    )
    assert_clean_error(result, "not a regular expression", "'shard_(0'", "split 'train'")
    assert not (dataset_dir / ".nv-meta").exists()
    out = tmp_path / "packed"
    packed = invoke("pack", str(dataset_dir), str(out), "--prepare", "--split-parts", "val:[")
    assert_clean_error(packed, "not a regular expression")
    assert not out.exists()


def test_huge_brace_range_in_split_yaml(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds")
    prepared = invoke(
        "prepare", str(root), "--non-interactive", "--split-ratio", "1,0,0", "--no-progress"
    )
    assert prepared.exit_code == 0, prepared.output
    split = root / ".nv-meta" / "split.yaml"
    split.write_text("split_parts: {train: ['shard-{000000..999999999}.tar']}\n")
    for command in ("info", "lint"):
        start = time.monotonic()
        proc = subprocess.run(
            [*STOKER, command, str(root)], capture_output=True, text=True, timeout=60
        )
        assert time.monotonic() - start < 30
        # info stops with an error (2); lint reports it as a finding of the dataset (1).
        assert proc.returncode == {"info": 2, "lint": 1}[command], (proc.stdout, proc.stderr)
        text = proc.stdout + proc.stderr
        assert "Traceback" not in text
        assert "1,000,000,000 names" in text and "split.yaml" in text
