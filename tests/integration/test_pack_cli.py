"""``stoker pack`` end to end: real images, ``--prepare``, byte-exact contents and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from PIL import Image

from stoker.format.meta import read_info, read_split_config
from stoker.storage import open_store

STOKER = [sys.executable, "-m", "stoker.cli.main"]
FIELD_MAP = '{"image": "png", "caption": "txt"}'
SAMPLES = 25


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STOKER, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """25 captioned PNGs in two sub-folders, plus a hidden file and a README to skip."""
    root = tmp_path / "images"
    for i in range(SAMPLES):
        folder = root / ("cats" if i % 2 else "dogs")
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8 + i, 6), (i * 9 % 256, 40, 200)).save(folder / f"{i:06d}.png")
        (folder / f"{i:06d}.txt").write_text(f"a small picture number {i}")
    (root / ".DS_Store").write_bytes(b"junk")
    (root / "README").write_text("captions by hand")
    return root


def originals(root: Path) -> dict[str, bytes]:
    """Expected member name -> bytes (the relative path of each packed file)."""
    files = [p for p in root.rglob("*") if p.is_file() and "." in p.name[1:]]
    return {str(p.relative_to(root)): p.read_bytes() for p in files if not p.name.startswith(".")}


def read_members(out: Path, shards: list[str]) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for shard in shards:
        with tarfile.open(out / shard) as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member)
                assert data is not None
                assert member.name not in found
                found[member.name] = data.read()
    return found


def test_pack_and_prepare_captioning(images: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    result = run(
        "pack", str(images), str(out), "--samples-per-shard", "10", "--prepare",
        "--split-ratio", "2,1,0", "--sample-type", "CaptioningSample", "--field-map", FIELD_MAP,
        "--num-workers", "2", "--no-progress", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["samples"] == SAMPLES
    assert report["shards"] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert sorted(s["path"] for s in report["skipped"]) == [".DS_Store", "README"]
    assert report["prepare"]["samples"] == SAMPLES
    store = open_store(str(out))
    info = read_info(store)
    assert info.shard_counts == {
        "shard-000000.tar": 10,
        "shard-000001.tar": 10,
        "shard-000002.tar": 5,
    }
    split = read_split_config(store)
    assert sorted(split.shards("train") + split.shards("val")) == report["shards"]
    assert len(split.shards("train")) == 2
    assert len(split.shards("val")) == 1
    dataset_yaml = yaml.safe_load((out / ".nv-meta" / "dataset.yaml").read_text())
    assert dataset_yaml["sample_type"]["__class__"] == "CaptioningSample"
    assert dataset_yaml["field_map"] == {"image": "png", "caption": "txt"}
    assert read_members(out, report["shards"]) == originals(images)
    assert all((out / f"{shard}.idx").exists() for shard in report["shards"])


def test_human_summary_shuffle_and_byte_limit(images: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    args = ["pack", str(images), str(out), "--max-shard-bytes", "20KiB", "--shuffle", "--seed", "3"]
    result = run(*args, "--no-progress")
    assert result.returncode == 0, result.stderr
    assert f"Packed {SAMPLES} samples" in result.stdout
    assert "Skipped 2 file(s)" in result.stdout
    shards = sorted(p.name for p in out.glob("*.tar"))
    assert len(shards) > 1
    assert all((out / name).stat().st_size <= 20 * 1024 for name in shards)
    assert read_members(out, shards) == originals(images)
    again = run(*args[:2], str(tmp_path / "again"), *args[3:], "--no-progress")
    assert again.returncode == 0, again.stderr
    assert all((out / n).read_bytes() == (tmp_path / "again" / n).read_bytes() for n in shards)


def test_jsonl_source_and_progress_on_stderr(tmp_path: Path) -> None:
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(5)))
    out = tmp_path / "shards"
    result = run("pack", str(source), str(out), "--samples-per-shard", "2", "--json")
    assert result.returncode == 0, result.stderr
    assert "Packing" in result.stderr
    members = read_members(out, json.loads(result.stdout)["shards"])
    assert members["00000003.json"] == b'{"text": "line 2"}'
    assert len(members) == 5


def test_errors_exit_2_and_leave_out_unchanged(images: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    assert run("pack", str(images), str(out), "--no-progress").returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    again = run("pack", str(images), str(out), "--samples-per-shard", "1", "--no-progress")
    assert again.returncode == 2
    assert "--force-overwrite" in again.stderr
    assert "Traceback" not in again.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    broken = run("pack", str(bad), str(tmp_path / "other"), "--no-progress")
    assert broken.returncode == 2
    assert "line 2" in broken.stderr
    assert "byte offset 9" in broken.stderr
    assert not (tmp_path / "other").exists()
    lonely = run("pack", str(images), str(tmp_path / "x"), "--split-ratio", "1,0,0")
    assert lonely.returncode == 2
    assert "--prepare" in lonely.stderr
    bad_ratio = run("pack", str(images), str(tmp_path / "x"), "--prepare", "--split-ratio", "8,1")
    assert bad_ratio.returncode == 2
    assert "invalid split ratio" in bad_ratio.stderr
    bad_type = run("pack", str(images), str(tmp_path / "x"), "--prepare", "--sample-type", "Nope")
    assert bad_type.returncode == 2
    assert "Nope" in bad_type.stderr
    bad_size = run("pack", str(images), str(tmp_path / "x"), "--max-shard-bytes", "lots")
    assert bad_size.returncode == 2
    assert "not a size" in bad_size.stderr
    assert not (tmp_path / "x").exists()


def test_force_overwrite_replaces_a_prepared_dataset(images: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    first = run(
        "pack", str(images), str(out), "--samples-per-shard", "5", "--prepare", "--no-progress"
    )
    assert first.returncode == 0, first.stderr
    second = run(
        "pack", str(images), str(out), "--samples-per-shard", "20", "--force-overwrite",
        "--no-progress",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        ".stoker-pack-manifest.json",
        "shard-000000.tar",
        "shard-000001.tar",
    ]


def test_cli_does_not_import_torch() -> None:
    code = "import sys, stoker.cli.pack; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_help_has_examples() -> None:
    result = run("pack", "--help")
    assert result.returncode == 0
    assert "stoker pack ./images ./shards --max-shard-bytes 1GiB" in result.stdout
    assert "--split-parts NAME:PATTERN" in result.stdout
