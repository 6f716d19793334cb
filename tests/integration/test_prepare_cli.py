"""``stoker prepare`` end to end: flags, the interactive wizard, exit codes and start-up cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from click.testing import CliRunner

from stoker.cli.main import cli
from stoker.cli.wizard import SAMPLE_TYPE_MENU
from tests.conftest import snapshot

STOKER = [sys.executable, "-m", "stoker.cli.main"]
FIELD_MAP = '{"text": "txt"}'


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STOKER, *args], capture_output=True, text=True, timeout=120)


def test_non_interactive_prepare(dataset_dir: Path) -> None:
    result = run(
        "prepare", str(dataset_dir), "--non-interactive", "--split-ratio", "2,1,0",
        "--sample-type", "TextSample", "--field-map", FIELD_MAP, "--no-progress", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["samples"] == 12 and [s["shards"] for s in report["splits"]] == [2, 1, 0]
    dataset_yaml = yaml.safe_load((dataset_dir / ".nv-meta/dataset.yaml").read_text())
    assert dataset_yaml["sample_type"]["__class__"] == "TextSample"
    assert dataset_yaml["field_map"] == {"text": "txt"}


def test_errors_are_one_paragraph_without_traceback(dataset_dir: Path, tmp_path: Path) -> None:
    missing = run("prepare", str(tmp_path / "nope"), "--non-interactive", "--split-ratio", "1,0,0")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "not a folder" in missing.stderr
    no_split = run("prepare", str(dataset_dir), "--non-interactive", "--no-progress")
    assert no_split.returncode == 2 and "--split-ratio" in no_split.stderr
    assert not (dataset_dir / ".nv-meta" / ".info.json").exists()
    bad_type = run(
        "prepare", str(dataset_dir), "--non-interactive", "--split-ratio", "1,0,0",
        "--sample-type", "CaptionSample", "--field-map", FIELD_MAP,
    )  # fmt: skip
    assert bad_type.returncode == 2 and "Known sample types" in bad_type.stderr
    before = snapshot(dataset_dir)
    bad_part = run(
        "prepare", str(dataset_dir), "--non-interactive", "--split-ratio", "1,0,0",
        "--sample-type", "TextSample", "--field-map", '{"text": "md"}', "--no-progress",
    )  # fmt: skip
    assert bad_part.returncode == 2 and "which no sample has" in bad_part.stderr
    # the dataset is as it was; only the shards' results are kept for the next run to resume
    after = {k: v for k, v in snapshot(dataset_dir).items() if "/.stoker-work/" not in k}
    assert after == before


def test_already_prepared(dataset_dir: Path) -> None:
    args = ["prepare", str(dataset_dir), "--non-interactive", "--split-ratio", "1,0,0"]
    assert run(*args).returncode == 0
    again = run(*args)
    assert again.returncode == 2 and "--force-overwrite" in again.stderr
    assert run(*args, "--force-overwrite").returncode == 0


def test_interactive_wizard(dataset_dir: Path) -> None:
    # split ratio, create dataset.yaml?, type number, field map?, then one part per field
    text_type = [name for _, name in SAMPLE_TYPE_MENU].index("TextSample")
    answers = f"8,1,1\ny\n{text_type}\ny\nmd\ntxt\n"
    result = CliRunner().invoke(cli, ["prepare", str(dataset_dir), "--no-progress"], input=answers)
    assert result.exit_code == 0, result.output
    assert "which no sample has" in result.output  # 'md' was refused, 'txt' accepted
    dataset_yaml = yaml.safe_load((dataset_dir / ".nv-meta/dataset.yaml").read_text())
    assert dataset_yaml["field_map"] == {"text": "txt"}
    assert (dataset_dir / ".nv-meta/split.yaml").exists()


def test_interactive_crude_and_refused_overwrite(dataset_dir: Path) -> None:
    crude_number = len(SAMPLE_TYPE_MENU) - 1  # listed after the typed samples
    result = CliRunner().invoke(
        cli, ["prepare", str(dataset_dir), "--no-progress", "--split-ratio", "1,0,0"],
        input=f"y\n{crude_number}\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "CrudeWebdataset" in (dataset_dir / ".nv-meta/dataset.yaml").read_text()
    before = snapshot(dataset_dir)
    refused = CliRunner().invoke(cli, ["prepare", str(dataset_dir)], input="n\n")
    assert refused.exit_code == 2 and snapshot(dataset_dir) == before


def test_jsonl_prepare(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "a"}\n{"text": "b"}\n')
    result = run("prepare", str(path), "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["samples"] == 2
    human = run("prepare", str(path))
    assert human.returncode == 0 and human.stdout.startswith("Done. Found 2 samples")  # as Energon
    assert (tmp_path / "t.jsonl.idx").stat().st_size == 24


def test_cli_never_imports_torch(dataset_dir: Path) -> None:
    code = (
        "import sys\n"
        "from stoker.cli.main import cli\n"
        "for args in (['--help'], ['prepare', '--help'], ['prepare', sys.argv[1],\n"
        "    '--non-interactive', '--split-ratio', '1,0,0', '--no-progress']):\n"
        "    try:\n"
        "        cli(args, standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(dataset_dir)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_wizard_numbers_sample_types_as_energon(dataset_dir: Path) -> None:
    # Megatron-LM's README tells users to type "9 (VQASample)"; 6 (the bare Sample) is refused.
    assert SAMPLE_TYPE_MENU[9] == ("VQASample", "VQASample")
    assert SAMPLE_TYPE_MENU[-1][1] == "CrudeWebdataset" and len(SAMPLE_TYPE_MENU) == 12
    answers = "1,0,0\ny\n6\n9\ny\ntxt\ntxt\n\n\n"
    result = CliRunner().invoke(cli, ["prepare", str(dataset_dir), "--no-progress"], input=answers)
    assert result.exit_code == 0, result.output
    assert "9. VQASample\n" in result.output and "11. Crude sample" in result.output
    assert "Sample is the base class" in result.output and result.output.rstrip().endswith("Done")
    dataset_yaml = yaml.safe_load((dataset_dir / ".nv-meta/dataset.yaml").read_text())
    assert dataset_yaml["sample_type"]["__class__"] == "VQASample"
    assert dataset_yaml["field_map"] == {"image": "txt", "context": "txt"}


def test_energon_module_paths_prepare_interactively(dataset_dir: Path) -> None:
    # Energon's own invocation, through the command object the alias serves for
    # megatron.energon.tools.prepare.command: an already prepared dataset, prepared again.
    from stoker.cli.energon_tools import prepare_command

    first = ["--non-interactive", "--split-ratio=1,0,0", "--no-progress"]
    assert CliRunner().invoke(prepare_command, [str(dataset_dir), *first]).exit_code == 0
    text_type = [name for _, name in SAMPLE_TYPE_MENU].index("TextSample")
    result = CliRunner().invoke(
        prepare_command, [str(dataset_dir)], input=f"y\n1,0,0\ny\n{text_type}\nY\ntxt\n"
    )
    assert result.exit_code == 0 and "Done" in result.stdout, result.output
    refused = CliRunner().invoke(prepare_command, [str(dataset_dir), "--non-interactive"])
    assert refused.exit_code == 1  # Energon's exit status for a refused run
