"""``pack --force-overwrite`` removes only what an earlier ``pack`` wrote (its manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli.main import cli
from stoker.errors import ConfigError
from stoker.format.pack import pack
from stoker.format.pack.manifest import MANIFEST
from tests.conftest import snapshot

FOREIGN = b"another dataset's shard"


def numbered(root: Path, count: int) -> Path:
    """``count`` samples ``000000.bin`` + ``000000.txt`` with distinct contents."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"{i:06d}.bin").write_bytes(bytes([i]) * 10)
        (root / f"{i:06d}.txt").write_text(f"caption {i}")
    return root


def shards(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob("*.tar"))


def manifest(out: Path) -> list[str]:
    return list(json.loads((out / MANIFEST).read_text())["shards"])


def test_repack_replaces_its_own_previous_shards(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(str(numbered(tmp_path / "a", 5)), str(out), samples_per_shard=1)
    assert manifest(out) == shards(out) == [f"shard-{i:06d}.tar" for i in range(5)]
    (out / "shard-000004.tar.idx").write_bytes(b"stale index")
    first = (out / "shard-000000.tar").read_bytes()
    report = pack(str(numbered(tmp_path / "b", 4)), str(out), samples_per_shard=2, overwrite=True)
    assert report.shards == shards(out) == manifest(out) == ["shard-000000.tar", "shard-000001.tar"]
    assert (out / "shard-000000.tar").read_bytes() != first
    assert not (out / "shard-000004.tar.idx").exists()


def test_foreign_tars_survive_force_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(str(numbered(tmp_path / "a", 3)), str(out), samples_per_shard=1)
    (out / "sub").mkdir()
    (out / "sub" / "shard-000000.tar").write_bytes(FOREIGN)
    (out / "mine.tar").write_bytes(FOREIGN)
    result = CliRunner().invoke(
        cli, ["pack", str(numbered(tmp_path / "b", 1)), str(out), "--force-overwrite"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "sub" / "shard-000000.tar").read_bytes() == FOREIGN
    assert (out / "mine.tar").read_bytes() == FOREIGN
    assert shards(out) == ["mine.tar", "shard-000000.tar"] and manifest(out) == ["shard-000000.tar"]


def test_foreign_file_in_the_way_of_a_new_shard_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "shard-000001.tar").write_bytes(FOREIGN)  # no manifest: not written by pack
    before = snapshot(out)
    with pytest.raises(ConfigError, match="did not write") as info:
        pack(str(numbered(tmp_path / "a", 3)), str(out), samples_per_shard=1, overwrite=True)
    assert "shard-000001.tar" in info.value.message and str(out) in info.value.message
    assert snapshot(out) == before


def test_source_inside_output_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    src = numbered(out / "raw", 2)
    (src / "keep.tar").write_bytes(FOREIGN)
    before = snapshot(out)
    with pytest.raises(ConfigError, match="source is inside the output folder") as info:
        pack(str(src), str(out), overwrite=True)
    assert "does not contain the source" in (info.value.hint or "")
    result = CliRunner().invoke(cli, ["pack", str(src), str(out), "--force-overwrite"])
    assert result.exit_code == 2 and "source is inside the output folder" in result.output
    assert "Traceback" not in result.output
    jsonl = out / "data.jsonl"
    jsonl.write_text('{"text": "a"}\n')
    with pytest.raises(ConfigError, match="source is inside the output folder"):
        pack(str(jsonl), str(out), overwrite=True)
    jsonl.unlink()
    assert snapshot(out) == before


def test_output_inside_source_is_still_refused(tmp_path: Path) -> None:
    src = numbered(tmp_path / "src", 2)
    with pytest.raises(ConfigError, match="inside it"):
        pack(str(src), str(src / "out"), overwrite=True)
    assert not (src / "out").exists()


def test_hostile_manifest_names_nothing_outside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(str(numbered(tmp_path / "a", 1)), str(out))
    victim = tmp_path / "victim.tar"
    victim.write_bytes(FOREIGN)
    (out / MANIFEST).write_text(json.dumps({"version": 1, "shards": ["../victim.tar"]}))
    with pytest.raises(ConfigError, match=r"plain \.tar file names") as info:
        pack(str(numbered(tmp_path / "b", 1)), str(out), overwrite=True)
    assert MANIFEST in info.value.message
    (out / MANIFEST).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot be read as JSON"):
        pack(str(numbered(tmp_path / "b", 1)), str(out), overwrite=True)
    assert victim.read_bytes() == FOREIGN


def test_foreign_meta_folder_is_not_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".nv-meta").mkdir(parents=True)
    (out / ".nv-meta" / "dataset.yaml").write_text("sample_type: {__class__: TextSample}\n")
    before = snapshot(out)
    with pytest.raises(ConfigError, match=r"no \.stoker-pack-manifest\.json"):
        pack(str(numbered(tmp_path / "a", 1)), str(out), overwrite=True)
    assert snapshot(out) == before
