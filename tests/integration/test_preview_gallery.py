"""`stoker preview` beyond the first samples: random draws, metadatasets (a section per dataset
with its weight against what the blend drew), video and audio, parts with their byte sizes."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from stoker.cli.preview import command
from stoker.preview import drawn_refs, preview_dataset, render_html
from tests.integration._images import make_image_dataset
from tests.integration._media import make_vidqa_dataset

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


@pytest.fixture(scope="module")
def blend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``blend.yaml``: ``big`` (weight 3, 40 samples) and ``small`` (weight 1, 20 samples)."""
    root = tmp_path_factory.mktemp("gallery")
    make_image_dataset(root / "big", {"train": {"train_big": 40}})
    make_image_dataset(root / "small", {"train": {"train_small": 20}})
    body = """\
        train:
          blend:
            - weight: 3
              path: ./big
            - weight: 1
              path: ./small
    """
    path = root / "blend.yaml"
    path.write_text(HEADER + textwrap.indent(textwrap.dedent(body), "  "))
    return path


def test_metadataset_gets_a_section_per_dataset_with_weight_and_drawn_share(
    blend: Path, tmp_path: Path
) -> None:
    out = tmp_path / "blend.html"
    result = CliRunner().invoke(command, [str(blend), "-n", "3", "--json", "--html", str(out)])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)
    root = blend.parent
    assert [(r["path"], r["info"]["weight"]) for r in reports] == [
        (str(root / "big"), "0.75"),
        (str(root / "small"), "0.25"),
    ]
    drawn = [re.match(r"(\d+) of (\d+) \(", r["info"]["drawn"]) for r in reports]
    counts = [int(m.group(1)) for m in drawn if m]
    assert len(counts) == 2 and sum(counts) == 160 == int(drawn[0].group(2))  # type: ignore[union-attr]
    assert abs(counts[0] / 160 - 0.75) < 0.1  # the blend's realised share, near its weight
    assert all(len(r["samples"]) == 3 for r in reports)
    assert reports[1]["samples"][0]["key"].startswith("train_small_")
    page = out.read_text(encoding="utf-8")
    assert page.count('<section class="dataset">') == 2 and page.count('class="tab"') == 1
    assert "<dt>weight</dt><dd>0.75</dd>" in page


def test_metadataset_text_output_says_the_weights(blend: Path) -> None:
    result = CliRunner().invoke(command, [str(blend), "-n", "1", "--blend-batches", "2"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^  weight 0\.75, drawn \d+ of 32 \(", result.stdout, re.M)
    assert re.search(r"^  weight 0\.25, drawn \d+ of 32 \(", result.stdout, re.M)


def test_shuffle_draws_the_same_samples_for_the_same_seed(blend: Path) -> None:
    data = str(blend.parent / "big")
    keys = [
        [s.key for s in preview_dataset(data, num_samples=5, seed=seed).samples]
        for seed in (7, 7, 8)
    ]
    assert keys[0] == keys[1] and keys[0] != keys[2]
    assert keys[0] != [f"train_big_{i:02d}" for i in range(5)]  # not the first five
    result = CliRunner().invoke(command, [data, "-n", "5", "--seed", "7"])  # --seed implies it
    assert result.exit_code == 0, result.output
    assert "5 of 40 samples drawn with seed 7" in result.stdout
    assert re.findall(r"^#\d+ (\S+)", result.stdout, re.M) == keys[0]


def test_drawn_refs_never_returns_excluded_samples() -> None:
    excluded = np.array([0, 1, 2, 3, 4, 5, 6], dtype=np.int64)
    for seed in range(20):
        refs = drawn_refs(10, excluded, 5, seed)
        assert sorted(refs) == [7, 8, 9]


def test_parts_and_full_text_are_kept(blend: Path) -> None:
    report = preview_dataset(str(blend.parent / "small"), num_samples=1, thumbnails=True)
    sample = report.samples[0]
    assert set(sample.parts) == {"jpg", "txt"}
    assert sample.parts["txt"] == len(b"a photo of train_small_00")
    assert report.info["shards"] == "1" and report.info["field map"] == "image: jpg, caption: txt"
    assert report.info["media metadata"].startswith("not prepared")
    page = render_html(report)
    assert '<td class="name">txt</td><td>25 B</td>' in page


def test_video_shows_duration_fps_and_a_strip_of_frames(tmp_path: Path) -> None:
    root = tmp_path / "vidqa"
    make_vidqa_dataset(root, per_shard=1)
    report = preview_dataset(str(root), num_samples=2, thumbnails=True)
    video = report.samples[0].fields["video"]  # 30 frames at 30 fps, with audio
    assert video.kind == "video"
    assert video.summary.startswith("video 1.00 s, 30 fps, 30 frames, 64x48; audio 1.0")
    assert len(video.thumbnails) == 8
    silent = report.samples[1].fields["video"]  # 36 frames, no audio track
    assert silent.summary == "video 1.20 s, 30 fps, 36 frames, 64x48"
    page = render_html(report)
    assert page.count('<div class="media strip">') == 2
    assert '<div class="badge">video 1.00 s, 30 fps' in page


def test_audio_shows_duration_and_rate_and_a_broken_file_says_so() -> None:
    from stoker.media.av_decoder import AVDecoder
    from stoker.preview import summarize
    from tests.integration._media import make_audio

    audio = summarize(AVDecoder(make_audio("wav", rate=16000, seconds=1.5)), thumbnails=True)
    assert (audio.kind, audio.summary, audio.thumbnails) == ("audio", "audio 1.50 s, 16000 Hz", ())
    broken = summarize(AVDecoder(b"not a media file"), thumbnails=True)
    assert broken.kind == "object" and broken.summary.startswith("media, unreadable: ")
