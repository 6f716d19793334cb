"""``stoker preview`` run as a real process: text, JSON and HTML output, crude data, errors."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.preview import kept_refs, summarize
from tests.conftest import write_shard

CAPTIONS = ["a red square", "a <b>bold</b> & brave cat", "line one\nline two", "x" * 300]


def stoker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def jpeg(i: int, height: int = 24, width: int = 40) -> bytes:
    pixels = np.full((height, width, 3), (60 * i) % 256, dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG")
    return buf.getvalue()


def write_captions(root: Path) -> None:
    """2 shards of 4 samples: JPEG image (24x40) + caption; sample i has CAPTIONS[i % 4]."""
    for s in range(2):
        samples = [(f"img{s}_{i}", {"jpg": jpeg(i), "txt": CAPTIONS[i].encode()}) for i in range(4)]
        write_shard(root / f"shard_{s}.tar", samples)


@pytest.fixture
def captions(tmp_path: Path) -> Path:
    root = tmp_path / "captions"
    write_captions(root)
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1)],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        num_workers=1,
    )
    return root


def test_text_preview_shows_keys_captions_and_image_shapes(captions: Path) -> None:
    result = stoker("preview", str(captions), "-n", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.splitlines()[0].endswith("CaptioningSample, samples 0 to 2 of 8")
    keys = re.findall(r"^#(\d+) (\S+)  \((\S+), sample (\d+), byte offset (\d+)\)$", out, re.M)
    assert [(k[0], k[1], k[2], k[3]) for k in keys] == [
        ("0", "img0_0", "shard_0.tar", "0"),
        ("1", "img0_1", "shard_0.tar", "1"),
        ("2", "img0_2", "shard_0.tar", "2"),
    ]
    assert keys[0][4] == "0" and int(keys[1][4]) > 0
    assert out.count("image 3x24x40 uint8") == 3
    assert "caption  a <b>bold</b> & brave cat  (str, 25 chars)" in out
    assert "caption  line one\\nline two  (str, 17 chars)" in out


def test_offset_crosses_shards_and_long_text_is_cut(captions: Path) -> None:
    result = stoker("preview", str(captions), "--offset", "3", "-n", "2")
    assert result.returncode == 0, result.stderr
    assert re.findall(r"^#\d+ (\S+)", result.stdout, re.M) == ["img0_3", "img1_0"]
    assert "x" * 199 + "…  (str, 300 chars)" in result.stdout


def test_json_preview(captions: Path) -> None:
    result = stoker("preview", str(captions), "-n", "2", "--image-decode", "torchrgb", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["sample_type"] == "CaptioningSample"
    assert report["total"] == 8
    assert [s["key"] for s in report["samples"]] == ["img0_0", "img0_1"]
    image = report["samples"][1]["fields"]["image"]
    assert image["kind"] == "image"
    assert image["shape"] == [3, 24, 40]
    assert image["dtype"] == "float32"
    assert 0.0 <= image["min"] <= image["max"] <= 1.0
    assert report["samples"][1]["fields"]["caption"]["text"] == CAPTIONS[1]


def test_html_preview_embeds_thumbnails_and_escapes_text(captions: Path, tmp_path: Path) -> None:
    out = tmp_path / "preview.html"
    result = stoker("preview", str(captions), "-n", "4", "--html", str(out))
    assert result.returncode == 0, result.stderr
    assert f"wrote 4 samples to {out}" in result.stderr
    page = out.read_text(encoding="utf-8")
    assert page.count("<img ") == 4
    assert len(re.findall(r'<img src="data:image/jpeg;base64,[A-Za-z0-9+/=]+"', page)) == 4
    assert "a &lt;b&gt;bold&lt;/b&gt; &amp; brave cat" in page
    assert "<b>bold" not in page
    for i in range(4):
        assert f"<h2>img0_{i}</h2>" in page


def test_crude_dataset_shows_each_part(tmp_path: Path) -> None:
    root = tmp_path / "crude"
    write_shard(
        root / "a.tar",
        [(f"k{i}", {"png": _png(i), "json": b'{"label": %d, "tags": ["x", "y"]}' % i})
         for i in range(3)],
    )  # fmt: skip
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1)],
        dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
        num_workers=1,
    )
    result = stoker("preview", str(root), "-n", "2")
    assert result.returncode == 0, result.stderr
    assert "CrudeWebdataset, samples 0 to 1 of 3" in result.stdout
    assert result.stdout.count("png   image 3x16x16 uint8") == 2
    assert 'json  dict[2]: {label: 1, tags: list[2]: ["x", "y"]}' in result.stdout


def test_jsonl_preview_shows_the_object_keys(tmp_path: Path) -> None:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": f"hello {i}", "id": i}) + "\n" for i in range(5)))
    prepare_jsonl(str(path))
    result = stoker("preview", str(path), "--offset", "1", "-n", "2")
    assert result.returncode == 0, result.stderr
    assert "JSONL (crude), samples 1 to 2 of 5" in result.stdout
    assert "json[text]  hello 1  (str, 7 chars)" in result.stdout
    assert "json[id]    int 2" in result.stdout


def test_unprepared_folder_is_an_error_without_traceback(tmp_path: Path) -> None:
    write_captions(tmp_path / "raw")
    result = stoker("preview", str(tmp_path / "raw"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_offset_past_the_end_is_an_error(captions: Path) -> None:
    result = stoker("preview", str(captions), "--offset", "8")
    assert result.returncode == 2
    assert "offset=8 is past the end of split 'train' (8 samples)" in result.stderr


def test_undecodable_sample_is_shown_with_its_error(tmp_path: Path) -> None:
    root = tmp_path / "broken"
    write_shard(root / "a.tar", [("good", {"jpg": jpeg(1), "txt": b"ok"}),
                                 ("bad", {"jpg": b"not a jpeg", "txt": b"no"})])  # fmt: skip
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1)],
        dataset_yaml=make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"}),
        num_workers=1,
    )
    result = stoker("preview", str(root))
    assert result.returncode == 0, result.stderr
    assert "#1 bad" in result.stdout
    assert "error: " in result.stdout.split("#1 bad")[1]


def test_help_has_examples() -> None:
    result = stoker("preview", "--help")
    assert result.returncode == 0
    assert "stoker preview ./shards -n 50 --html preview.html" in result.stdout


def test_kept_refs_skips_excluded_samples() -> None:
    excluded = np.array([0, 3, 4], dtype=np.int64)
    assert kept_refs(8, excluded, 0, 3) == [1, 2, 5]
    assert kept_refs(8, excluded, 2, 10) == [5, 6, 7]
    assert kept_refs(8, np.zeros(0, np.int64), 6, 5) == [6, 7]


def test_video_tensor_gets_a_row_of_frames() -> None:
    import torch

    video = torch.zeros(20, 3, 16, 16, dtype=torch.uint8)
    summary = summarize(video, thumbnails=True)
    assert summary.kind == "video"
    assert len(summary.thumbnails) == 8
    assert all(uri.startswith("data:image/jpeg;base64,") for uri in summary.thumbnails)


def _png(i: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((16, 16, 3), i, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()
