"""Energon's ``prepare --fix-duplicates`` and ``--tmp-path``, and ``info --dataset-config``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
from click.testing import CliRunner

from stoker.cli.info import command as info_command
from stoker.cli.prepare import command as prepare_command
from stoker.format.fix_duplicates import fix_duplicate_keys
from stoker.format.prepare import index_shards
from tests.conftest import snapshot, text_samples, write_shard

PREPARE = ["--non-interactive", "--split-ratio", "1,0,0", "--no-progress"]


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def duplicated(root: Path, fmt: int = tarfile.GNU_FORMAT) -> Path:
    """Two shards (one in a sub-folder) with the same three keys, as merged datasets have."""
    write_shard(root / "a.tar", text_samples("k", 3), fmt)
    write_shard(root / "part/b.tar", text_samples("k", 3), fmt)
    return root


def keys(root: Path) -> list[str]:
    with sqlite3.connect(f"file:{root / '.nv-meta/index.sqlite'}?mode=ro", uri=True) as db:
        return sorted(row[0] for row in db.execute("SELECT sample_key FROM samples"))


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT])
def test_fix_duplicates_prefixes_members_with_their_shard(tmp_path: Path, fmt: int) -> None:
    root = duplicated(tmp_path / "ds", fmt)
    before = {name: members(root / name) for name in ("a.tar", "part/b.tar")}
    sizes = {name: (root / name).stat().st_size for name in before}
    plain = CliRunner().invoke(prepare_command, [str(root), *PREPARE])
    assert plain.exit_code != 0 and "--fix-duplicates" in plain.output
    assert "duplicate sample key" in plain.output and "Traceback" not in plain.output
    assert {name: members(root / name) for name in before} == before  # nothing changed

    fixed = CliRunner().invoke(prepare_command, [str(root), *PREPARE, "--fix-duplicates"])
    assert fixed.exit_code == 0, fixed.output
    assert "3 sample keys occurred in more than one shard" in fixed.output
    for name, old in before.items():
        assert members(root / name) == {f"{name}/{member}": data for member, data in old.items()}
        assert (root / name).stat().st_size == sizes[name]  # headers rewritten in place
    assert keys(root) == sorted(f"{s}/k{i:05d}" for s in ("a.tar", "part/b.tar") for i in range(3))


def test_long_names_go_to_the_ustar_prefix_field(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    key = "d" * 60 + "/" + "n" * 40  # 101 characters: fits only when split at a '/'
    for shard in ("a.tar", "b.tar"):
        write_shard(root / shard, [(key, {"txt": b"x"})], tarfile.USTAR_FORMAT)
    report = fix_duplicate_keys(str(root))
    assert (report.duplicate_keys, report.renamed_shards) == (1, 2)
    assert members(root / "a.tar") == {f"a.tar/{key}.txt": b"x"}
    with open(root / "a.tar", "rb") as f:
        header = f.read(512)
    assert header[345:500].rstrip(b"\0") == f"a.tar/{'d' * 60}".encode()


def test_refused_before_writing_when_a_rename_cannot_be_in_place(tmp_path: Path) -> None:
    root = duplicated(tmp_path / "ds")
    long_key = "x" * 120  # a GNU long-name header
    write_shard(root / "c.tar", [(long_key, {"txt": b"y"})])
    before = snapshot(root)
    result = CliRunner().invoke(prepare_command, [str(root), *PREPARE, "--fix-duplicates"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "cannot be renamed in place" in result.output
    assert "GNU long name" in result.output and "c.tar" in result.output
    assert snapshot(root) == before


def test_no_duplicates_leaves_the_shards_alone(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_shard(root / "a.tar", text_samples("a", 2))
    write_shard(root / "b.tar", text_samples("b", 2))
    before = snapshot(root)
    result = CliRunner().invoke(prepare_command, [str(root), *PREPARE, "--fix-duplicates"])
    assert result.exit_code == 0 and "No duplicate keys found" in result.output
    assert {n: d for n, d in snapshot(root).items() if n.endswith(".tar")} == before
    assert keys(root) == ["a00000", "a00001", "b00000", "b00001"]


def test_prepared_dataset_is_not_renamed_without_force_overwrite(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_shard(root / "a.tar", text_samples("a", 2))
    assert CliRunner().invoke(prepare_command, [str(root), *PREPARE]).exit_code == 0
    write_shard(root / "b.tar", text_samples("a", 2))  # a duplicate added afterwards
    before = snapshot(root)
    again = CliRunner().invoke(prepare_command, [str(root), *PREPARE, "--fix-duplicates"])
    assert again.exit_code != 0 and "already prepared" in again.output
    assert snapshot(root) == before
    forced = [*PREPARE, "--fix-duplicates", "--force-overwrite"]
    assert CliRunner().invoke(prepare_command, [str(root), *forced]).exit_code == 0
    assert keys(root) == ["a.tar/a00000", "a.tar/a00001", "b.tar/a00000", "b.tar/a00001"]


@pytest.mark.energon
def test_energon_prepares_and_reads_the_renamed_shards(tmp_path: Path) -> None:
    pytest.importorskip("megatron.energon")
    root = duplicated(tmp_path / "ds")
    fix_duplicate_keys(str(root))
    done = subprocess.run(
        [sys.executable, "-m", "megatron.energon.cli.main", "prepare", str(root), *PREPARE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert keys(root) == sorted(f"{s}/k{i:05d}" for s in ("a.tar", "part/b.tar") for i in range(3))


@pytest.fixture
def memory_dataset() -> Iterator[str]:
    url = f"memory://stoker-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    for name, samples in (("a.tar", text_samples("a", 3)), ("b.tar", text_samples("b", 2))):
        local = write_shard(Path(f"/tmp/{uuid.uuid4().hex}.tar"), samples)
        fs.pipe(f"{url}/{name}", local.read_bytes())
        local.unlink()
    yield url
    fs.rm(url, recursive=True)


def test_tmp_path_is_where_a_remote_index_is_built(memory_dataset: str, tmp_path: Path) -> None:
    build = tmp_path / "build" / "here"  # made when missing
    with index_shards(memory_dataset, tmp_dir=str(build)) as pending:
        db = pending.index_db_path()
        assert Path(db).parent == build and Path(db).is_file()
        pending.publish(split_ratio=[("train", 1.0)])
    assert not Path(db).exists()  # uploaded, then removed
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"{memory_dataset}/.nv-meta/index.sqlite")


def test_tmp_path_flag(memory_dataset: str, tmp_path: Path) -> None:
    build = tmp_path / "build"
    result = CliRunner().invoke(
        prepare_command, [memory_dataset, *PREPARE, "--tmp-path", str(build)]
    )
    assert result.exit_code == 0, result.output
    assert build.is_dir() and list(build.iterdir()) == []
    info = CliRunner().invoke(info_command, [memory_dataset, "--json"])
    assert info.exit_code == 0 and '"samples": 5' in info.output.replace("  ", " ")
    a_file = tmp_path / "file"
    a_file.write_text("")
    bad = CliRunner().invoke(prepare_command, [memory_dataset, *PREPARE, "--tmp-path", str(a_file)])
    assert bad.exit_code == 2 and "is a file" in bad.output


def test_info_dataset_config_names_the_missing_file(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_shard(root / "a.tar", text_samples("a", 2))
    args = [*PREPARE, "--sample-type", "TextSample", "--field-map", '{"text": "txt"}']
    assert CliRunner().invoke(prepare_command, [str(root), *args]).exit_code == 0
    (root / ".nv-meta/other.yaml").write_text(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\n"
    )
    typed = CliRunner().invoke(info_command, [str(root)])
    crude = CliRunner().invoke(info_command, [str(root), "--dataset-config", "other.yaml"])
    assert "TextSample" in typed.output and "crude" in crude.output
    missing = CliRunner().invoke(info_command, [str(root), "--dataset-config", "nope.yaml"])
    assert missing.exit_code != 0 and "nope.yaml" in missing.output
    assert "Traceback" not in missing.output
