"""What users read: install hints, one-line errors, --debug, did-you-mean, doctor, progress."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from stoker.cli.main import cli
from stoker.errors import ConfigError, MissingDependencyError, did_you_mean, require
from stoker.format.progress import Progress, track
from stoker.pipeline.decode import SampleDecoder
from tests.conftest import make_dataset

STOKER = [sys.executable, "-m", "stoker.cli.main"]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*STOKER, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}
    )


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4)).save(out, "JPEG")
    return out.getvalue()


def test_missing_dependency_names_the_extra_and_is_an_import_error() -> None:
    error = MissingDependencyError.for_module("av", "reading video")
    assert isinstance(error, ModuleNotFoundError) and error.name == "av"
    assert error.message == (
        "reading video needs PyAV, which is not installed. "
        "Install it with: pip install 'stoker[av]'"
    )
    copy = pickle.loads(pickle.dumps(error))  # crosses from a worker process intact
    assert type(copy) is MissingDependencyError and copy.message == error.message
    other = ModuleNotFoundError("No module named 'foo'", name="foo")
    assert MissingDependencyError.from_import_error(other, "x") is None  # not an optional one
    with pytest.raises(ModuleNotFoundError, match="nonexistent_mod"):
        require("nonexistent_mod", "x")


def test_image_decoding_without_pillow_fails_the_run_with_the_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "PIL.Image", None)  # as if Pillow were not installed
    monkeypatch.setitem(sys.modules, "simplejpeg", None)
    decoder = SampleDecoder(image_decode="torchrgb8")
    with pytest.raises(MissingDependencyError, match=r"pip install 'stoker\[image\]'"):
        decoder({"__key__": "k", "jpg": jpeg()})


def test_pillow_errors_do_not_show_in_memory_file_reprs() -> None:
    decoder = SampleDecoder(image_decode="torchrgb8")
    with pytest.raises(Exception, match="not an image Pillow can read") as info:
        decoder({"__key__": "k", "png": b"not a png"})
    assert "BytesIO" not in str(info.value) and "0x" not in str(info.value)


def test_prepare_media_without_pillow_exits_non_zero_with_the_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import write_shard

    write_shard(tmp_path / "ds/a.tar", [(f"{i:03d}", {"jpg": jpeg()}) for i in range(3)])
    assert CliRunner().invoke(cli, ["prepare", str(tmp_path / "ds"), "--non-interactive",
                                    "--split-ratio", "1,0,0"]).exit_code == 0  # fmt: skip
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    result = CliRunner().invoke(
        cli, ["prepare-media", str(tmp_path / "ds"), "--media-metadata-by-extension",
              "--num-workers", "1", "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "pip install 'stoker[image]'" in result.output and "0 media files" not in result.output


def test_user_errors_are_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    plain = run("info", str(tmp_path / "missing"))
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.startswith("error: ") and len(plain.stderr.strip().splitlines()) == 1
    debug = run("--debug", "info", str(tmp_path / "missing"))
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "StorageError" in debug.stderr
    assert "Traceback" in run("info", str(tmp_path / "missing"), STOKER_DEBUG="1").stderr


def test_did_you_mean() -> None:
    assert did_you_mean("CaptionSample", ["CaptioningSample", "TextSample"]) == (
        "Did you mean 'CaptioningSample'? "
    )
    assert did_you_mean("zzz", ["weight", "path"]) == ""
    typo = run("prevew", "x")
    assert typo.returncode == 2 and "Did you mean 'preview'?" in typo.stderr


def test_did_you_mean_in_prepare_and_metadataset_messages(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "ds")
    result = CliRunner().invoke(
        cli, ["prepare", str(data), "--non-interactive", "--split-ratio", "1,0,0",
              "--sample-type", "CaptionSample"],
    )  # fmt: skip
    assert result.exit_code == 2 and "Did you mean 'CaptioningSample'?" in result.output
    result = CliRunner().invoke(
        cli, ["prepare", str(data), "--non-interactive", "--split-ratio", "1,0,0",
              "--sample-type", "TextSample", "--field-map", '{"txt": "txt"}'],
    )  # fmt: skip
    assert result.exit_code == 2 and "Did you mean 'text'?" in result.output
    from stoker.metadataset import load_metadataset

    yaml_path = tmp_path / "mds.yaml"
    yaml_path.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\n"
        f"splits:\n  train:\n    blend:\n      - {{path: {data}, wieght: 2}}\n"
    )
    with pytest.raises(ConfigError, match="Did you mean 'weight'"):
        load_metadataset(str(yaml_path))


def test_image_decode_is_a_choice() -> None:
    result = run("preview", "x", "--image-decode", "torchrbg")
    assert result.returncode == 2 and "'torchrbg' is not one of" in result.stderr
    assert "torchrgb8" in result.stderr and "Traceback" not in result.stderr


def test_doctor_lists_backends_and_extras() -> None:
    result = run("doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    import torch

    assert report["backends"]["torch"] == torch.__version__
    assert {"torch", "image", "http", "lightning", "all"} <= set(report["extras"])
    human = run("doctor", NO_COLOR="1")
    assert "torch" in human.stdout and "\x1b[" not in human.stdout


def test_progress_off_a_terminal_is_plain_lines(capfd: pytest.CaptureFixture[str]) -> None:
    os.environ["STOKER_PROGRESS_INTERVAL"] = "0"
    try:
        with closing(Progress(3, "Indexing shards")) as bar:
            for _ in range(3):
                bar.update(1)
        assert list(track(range(2), desc="Joining", unit="join")) == [0, 1]
        with closing(Progress(None, "Decoding train", unit="sample")) as counter:
            counter.update(5)
    finally:
        del os.environ["STOKER_PROGRESS_INTERVAL"]
    err = capfd.readouterr().err
    assert "\r" not in err and "\x1b[" not in err
    lines = err.splitlines()
    shards = [line for line in lines if line.startswith("Indexing shards: ")]
    assert shards[0].startswith("Indexing shards: 1/3 (33%), ") and "ETA " in shards[0]
    assert shards[-1].startswith("Indexing shards: 3/3 (100%)") and "done in" in shards[-1]
    assert [line for line in lines if "Joining" in line][-1].startswith("Joining: 2/2 (100%)")
    assert lines[-1].startswith("Decoding train: 5, ") and "sample/s - done in" in lines[-1]
    assert len(shards) + 3 + 2 == len(lines)
