"""``stoker lint`` decodes every sample as the loader would, in parallel processes: a corrupt
JPEG in the middle of a shard is named with its shard, key and byte offset; ``--no-decode``
is the fast structural check that does not see it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from stoker.cli.main import cli
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.preview.lint_decode import decode_samples
from tests.conftest import write_shard

SHARDS, PER_SHARD = 3, 6


def jpeg(seed: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 12), (seed * 40 % 256, 80, 160)).save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
def images(tmp_path: Path) -> Path:
    """3 shards of 6 image+caption samples; sample 3 of shard 1 has a JPEG cut in half (same
    length, the rest zeros), so the tar and its index stay valid."""
    root = tmp_path / "ds"
    for s in range(SHARDS):
        samples = []
        for i in range(PER_SHARD):
            data = jpeg(s * PER_SHARD + i)
            if (s, i) == (1, 3):
                data = data[: len(data) // 2] + bytes(len(data) - len(data) // 2)
            samples.append((f"s{s}_{i:03d}", {"jpg": data, "txt": f"caption {i}".encode()}))
        write_shard(root / f"shard_{s:03d}.tar", samples)
    prepare_dataset(
        str(root),
        split_parts=[("train", "shard_00[01]"), ("val", "shard_002")],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        num_workers=1,
    )
    return root


def sample_offset(root: Path, shard: str, index: int) -> int:
    raw = (root / f"{shard}.idx").read_bytes()
    return int.from_bytes(raw[8 * index : 8 * index + 8], "little")


def test_lint_finds_a_corrupt_jpeg_in_the_middle_of_a_shard(images: Path) -> None:
    result = CliRunner().invoke(cli, ["lint", str(images), "--parallel", "2", "--no-progress"])
    assert result.exit_code == 1, result.output
    offset = sample_offset(images, "shard_001.tar", 3)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: shard_001.tar, sample 's1_003', byte offset {offset}:")
    assert "cannot decode the part as 'jpg'" in errors[0]
    assert result.output.splitlines()[-1] == (
        f"checked {SHARDS} shards, {SHARDS * PER_SHARD} samples "
        f"({SHARDS * PER_SHARD} decoded): 1 error, 0 warnings"
    )


def test_no_decode_is_the_structural_check(images: Path) -> None:
    result = CliRunner().invoke(cli, ["lint", str(images), "--no-decode", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"checked {SHARDS} shards, 18 samples: no problems"


def test_lint_json_lists_the_undecodable_sample(images: Path) -> None:
    result = CliRunner().invoke(cli, ["lint", str(images), "--json"])
    report = json.loads(result.output)
    assert (report["ok"], report["samples_decoded"]) == (False, SHARDS * PER_SHARD)
    (finding,) = report["findings"]
    assert (finding["path"], finding["key"]) == ("shard_001.tar", "s1_003")


@pytest.mark.parametrize("workers", [1, 2])
def test_decode_samples_counts_each_shard_once(images: Path, workers: int) -> None:
    """Excluded samples are skipped (the loader never reads them), each failure is listed."""
    split = images / ".nv-meta/split.yaml"
    split.write_text(split.read_text() + "exclude: ['shard_000.tar/s0_001']\n")
    report = decode_samples(str(images), num_workers=workers)
    assert (report.checked, report.failed) == (SHARDS * PER_SHARD - 1, 1)
    assert [(f.path, f.key) for f in report.findings] == [("shard_001.tar", "s1_003")]
    only_val = decode_samples(str(images), split_parts=["val"], num_workers=workers)
    assert (only_val.checked, only_val.failed) == (PER_SHARD, 0)


def test_without_torch_lint_says_what_to_install(images: Path) -> None:
    code = (
        "import sys\nsys.modules['torch'] = None  # as if torch were not installed\n"
        "from stoker.cli.main import cli\ncli(['lint', sys.argv[1], '--no-progress'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(images)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "pip install 'stoker[torch,image]', or pass --no-decode" in result.stdout


def test_lint_reads_video_headers_as_the_loader_would(tmp_path: Path) -> None:
    """Video parts decode lazily in the loader; lint opens their containers, so a cut video
    is named with its shard, key and offset."""
    pytest.importorskip("av")
    from tests.integration._media import make_vidqa_dataset

    root = tmp_path / "videos"
    make_vidqa_dataset(root, corrupt=["clips_b_01"])
    report = decode_samples(str(root), num_workers=2)
    assert (report.checked, report.failed) == (6, 1)
    (finding,) = report.findings
    assert (finding.path, finding.key) == ("clips_b.tar", "clips_b_01")
    assert finding.offset == sample_offset(root, "clips_b.tar", 1)
