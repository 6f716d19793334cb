"""Energon's next release's prepare names (``--no-sample-tables``, ``MissingSamplesTableError``),
and a tar member whose name is not UTF-8, through the CLI."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import stoker
from stoker.cli.energon_tools import prepare_command
from stoker.cli.main import cli
from stoker.errors import ConfigError, MissingSampleIndexError, StorageError
from stoker.format.mount import DatasetTree
from tests.conftest import make_dataset

ARGS = ["--non-interactive", "--split-ratio", "1,0,0", "--no-progress"]


@pytest.mark.parametrize("invoke", ["stoker", "energon"])
def test_no_sample_tables_is_no_sample_index(tmp_path: Path, invoke: str) -> None:
    root = make_dataset(tmp_path / "ds", shards=2, per_shard=3)
    command = cli if invoke == "stoker" else prepare_command
    args = [str(root), *ARGS, "--sample-type", "TextSample", "--field-map", '{"text": "txt"}']
    if invoke == "stoker":
        args = ["prepare", *args]
    result = CliRunner().invoke(command, [*args, "--no-sample-tables"])
    assert result.exit_code == 0, result.output
    assert (root / ".nv-meta" / ".info.json").exists()
    assert not (root / ".nv-meta" / "index.sqlite").exists()
    assert len(list(root.glob("*.tar.idx"))) == 2

    with pytest.raises(stoker.MissingSamplesTableError, match="--no-sample-tables") as caught:
        DatasetTree(str(root))
    error = caught.value
    assert isinstance(error, MissingSampleIndexError)
    assert isinstance(error, ConfigError) and isinstance(error, StorageError)
    assert isinstance(error, RuntimeError)  # Energon's base class


def test_energon_module_path_serves_missing_samples_table_error(tmp_path: Path) -> None:
    """Through the alias, in a fresh process (the real Energon is installed here too)."""
    root = make_dataset(tmp_path / "ds", shards=1, per_shard=2)
    assert (
        CliRunner().invoke(cli, ["prepare", str(root), *ARGS, "--no-sample-tables"]).exit_code == 0
    )
    code = textwrap.dedent(
        f"""
        import stoker.energon_alias as alias
        alias.install()
        from megatron.energon.flavors.webdataset.indexing import MissingSamplesTableError
        import stoker
        from stoker.format.mount import DatasetTree
        assert MissingSamplesTableError is stoker.MissingSampleIndexError
        try:
            DatasetTree({str(root)!r})
        except MissingSamplesTableError as e:
            print("caught:", e)
        try:
            from megatron.energon.flavors.webdataset.indexing import SqliteIndexReader
        except ImportError as e:
            print("refused:", e)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "caught:" in out.stdout and "--no-sample-tables" in out.stdout
    assert "refused:" in out.stdout and "stoker.prepare_dataset" in out.stdout


def _shard_with_names(path: Path, names: list[bytes]) -> None:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tar:
        for raw in names:
            info = tarfile.TarInfo(raw.decode("utf-8", "surrogateescape"))
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))


def test_non_utf8_member_name_is_refused_with_shard_and_offset(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    root.mkdir()
    _shard_with_names(root / "good.tar", [b"0000.txt", b"0001.txt"])
    _shard_with_names(root / "bad.tar", [b"0000b.txt", b"\xff\xfe0001.txt", b"0002.txt"])
    command = [sys.executable, "-m", "stoker.cli", "prepare", str(root), *ARGS]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    message = result.stderr
    assert "Traceback" not in message and "UnicodeEncodeError" not in message
    assert f"{root / 'bad.tar'}, byte offset 1024" in message  # the second member's header
    assert r"b'\xff\xfe0001.txt' is not valid UTF-8" in message
    assert "--exclude" in message
    assert not (root / ".nv-meta" / ".info.json").exists()  # nothing published

    again = subprocess.run([*command, "--exclude", "bad"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr  # the other shard prepares as usual
