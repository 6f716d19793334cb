"""stoker installed into fresh virtual environments, with no extras, ``[torch]``, ``[image]``
and ``[all]``: each way in (loading in Python, ``stoker preview``, ``stoker checkpoint info``,
``stoker prepare-media``, PyAV) gives its result or one line naming the extra to install, and
never a traceback.

The environments are real (``python -m venv``, no system site-packages) and stoker is installed
from a wheel of this checkout, its dependencies from the package index that pip is set up with
(torch is pinned to the CPU build on disk). To keep it to two environments and one torch
install, ``[image]`` is added to the no-extras environment and ``[all]`` to the ``[torch]`` one
after their checks. Two to four minutes on two cores; skipped where no index can be reached.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from PIL import Image

from stoker import WorkerConfig, get_savable_loader, get_train_dataset
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TORCH_PIN = "torch==2.13.0"  # the CPU build on disk; a plain torch would fetch a CUDA build
OFFLINE = re.compile(r"NewConnectionError|Failed to establish|Temporary failure in name resolution")

#: env -> (extras, what each check gives: "ok" or the extra whose install hint it prints)
ENVS: dict[str, tuple[str, dict[str, str]]] = {
    "none": ("", {"load": "torch", "preview": "torch", "ckpt": "torch", "media": "image"}),
    "torch": ("torch", {"load": "image", "preview": "image", "ckpt": "ok", "media": "image"}),
    "image": ("image", {"load": "torch", "preview": "torch", "ckpt": "torch", "media": "ok"}),
    "all": ("all", {"load": "ok", "preview": "ok", "ckpt": "ok", "media": "ok", "av": "ok"}),
}

LOAD = """
import sys
from stoker.errors import StokerError
try:
    from stoker import WorkerConfig, get_loader, get_train_dataset
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = get_train_dataset(sys.argv[1], worker_config=wc, batch_size=2,
                           shuffle_buffer_size=None, max_samples_per_sequence=None)
    for batch in get_loader(ds):
        print("RESULT", tuple(batch.image.shape))
        break
except StokerError as e:
    print("HINT", e)
"""
AV = """
from stoker.errors import StokerError
from stoker.media.container import import_av
try:
    print("RESULT", import_av().__name__)
except StokerError as e:
    print("HINT", e)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of this checkout, built from a copy (no build/ or egg-info left in the tree)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)]
    # this environment's setuptools first (fast, offline); an isolated build where it is too old
    if subprocess.run([*pip, "--no-build-isolation"], capture_output=True).returncode != 0:
        subprocess.run(pip, check=True, capture_output=True)
    return next(out.glob("stoker-*.whl"))


@pytest.fixture(scope="module")
def image_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 shards of 4 samples (an 8x8 JPEG and a caption), prepared as CaptioningSample."""
    root = tmp_path_factory.mktemp("images")
    for s in range(2):
        with tarfile.open(root / f"shard_{s}.tar", "w") as tar:
            for i in range(4):
                jpeg = io.BytesIO()
                Image.new("RGB", (8, 8), (30 * i, 0, 0)).save(jpeg, "JPEG")
                for ext, data in (("jpg", jpeg.getvalue()), ("txt", f"image {s} {i}".encode())):
                    info = tarfile.TarInfo(f"{s}{i:04d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    yaml = make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"})
    prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=yaml)
    return root


@pytest.fixture(scope="module")
def state_file(image_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A loader state saved with torch.save after one batch."""
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = get_train_dataset(
        str(image_dataset), worker_config=wc, batch_size=2,
        shuffle_buffer_size=None, max_samples_per_sequence=None,
    )  # fmt: skip
    loader = get_savable_loader(ds)
    next(iter(loader))
    path = tmp_path_factory.mktemp("state") / "loader_state.pt"
    torch.save(loader.save_state_rank(), path)
    return path


def make_env(tmp_path: Path) -> Path:
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, capture_output=True)
    return env


def install(env: Path, wheel: Path, extras: str) -> None:
    """pip install stoker[extras] into ``env`` (skips the test where no index can be reached)."""
    spec = f"{wheel}[{extras}]" if extras else str(wheel)
    pins = [TORCH_PIN] if extras in ("torch", "all") else []
    cmd = [str(env / "bin/python"), "-m", "pip", "install", "-q", "--no-compile", spec, *pins]
    done = run(env, *cmd, timeout=480)
    if done.returncode != 0 and OFFLINE.search(done.stdout + done.stderr):
        pytest.skip("the package index cannot be reached: no fresh environment can be made")
    assert done.returncode == 0, done.stdout + done.stderr


def run(env: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run in ``env`` alone: none of this process's paths (PYTHONPATH, its venv) leak in."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    clean |= {"NO_COLOR": "1", "PATH": f"{env / 'bin'}{os.pathsep}{clean.get('PATH', '')}"}
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout, env=clean, cwd=env
    )


def check_cli(result: subprocess.CompletedProcess[str], expected: str, shows: str) -> None:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    if expected == "ok":
        assert result.returncode == 0 and shows in result.stdout, output
        return
    assert result.returncode == 2, output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert lines[0].endswith(f"pip install 'stoker[{expected}]'"), output


def check_python(result: subprocess.CompletedProcess[str], expected: str, shows: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output
    if expected == "ok":
        assert result.stdout.startswith(f"RESULT {shows}"), output
    else:
        assert result.stdout.startswith("HINT ") and len(result.stdout.splitlines()) == 1, output
        assert result.stdout.rstrip().endswith(f"pip install 'stoker[{expected}]'"), output


@pytest.mark.parametrize(("first", "then"), [("none", "image"), ("torch", "all")])
def test_fresh_install(
    first: str, then: str, wheel: Path, image_dataset: Path, state_file: Path, tmp_path: Path
) -> None:
    """A fresh environment with one set of extras; then the next set added to it (as a user
    who reads the hint does), which keeps this to two environments and one torch install."""
    env = make_env(tmp_path)
    for name in (first, then):
        install(env, wheel, ENVS[name][0])
        check_env(env, name, image_dataset, state_file, tmp_path)


def check_env(env: Path, name: str, image_dataset: Path, state_file: Path, tmp_path: Path) -> None:
    extras, expected = ENVS[name]
    python, stoker = str(env / "bin/python"), str(env / "bin/stoker")
    assert run(env, python, "-c", "import stoker").returncode == 0

    doctor = run(env, stoker, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)
    assert (report["backends"]["torch"] is not None) == (extras in ("torch", "all"))
    assert (report["backends"]["pillow"] is not None) == (extras in ("image", "all"))
    assert report["extras"]["all"] == (extras == "all")
    # (the GPU extras are not in `all`: a CPU install never pulls CUDA libraries)
    cpu_extras = {k: v for k, v in report["extras"].items() if not k.startswith("gpu")}
    assert all(cpu_extras.values()) == (extras == "all")
    assert not any(v for k, v in report["extras"].items() if k.startswith("gpu"))

    check_python(run(env, python, "-c", LOAD, str(image_dataset)), expected["load"], "(2, 3, 8, 8)")
    check_python(run(env, python, "-c", AV), expected.get("av", "av"), "av")
    preview = run(env, stoker, "preview", str(image_dataset), "-n", "1")
    check_cli(preview, expected["preview"], "caption")
    check_cli(run(env, stoker, "checkpoint", "info", str(state_file)), expected["ckpt"], "state")
    media = run(
        env, stoker, "prepare-media", str(image_dataset), "--media-metadata-by-extension",
        "--no-progress",
    )  # fmt: skip
    check_cli(media, expected["media"], "Stored metadata of 8 media files")
    missing = run(env, stoker, "info", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
