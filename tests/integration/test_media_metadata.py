"""``stoker prepare-media`` and ``prepare --media-metadata-by-*``: records, filters, bad files,
atomicity, lookups from task encoders, and Energon reading what stoker wrote."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from PIL import Image

from stoker import (
    AVMetadata,
    DefaultTaskEncoder,
    ImageMetadata,
    WorkerConfig,
    get_loader,
    get_train_dataset,
)
from stoker.cli.main import cli
from stoker.errors import ConfigError, SampleError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.media.extract import MediaFilter
from stoker.media.lookup import get_media_metadata
from stoker.media.prepare import prepare_media
from tests.conftest import snapshot, write_shard
from tests.integration._media import make_audio, make_video

STOKER = [sys.executable, "-m", "stoker.cli.main"]


def png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (1, 2, 3)).save(buf, format="PNG")
    return buf.getvalue()


def write_media_shards(root: Path, prepare: bool = True) -> Path:
    video, audio = make_video("mp4"), make_audio("flac")
    write_shard(
        root / "media_0.tar",
        [
            ("s0", {"mp4": video, "png": png(8, 6), "json": b"{}"}),
            ("s1", {"flac": audio, "bin": video, "txt": b"hello"}),
        ],
    )
    write_shard(
        root / "media_1.tar",
        [
            ("s2", {"mp4": video[:400], "png": png(5, 7)}),  # a corrupt video
            ("s3", {"wav": make_audio("wav", seconds=0.5)}),
        ],
    )
    if prepare:
        prepare_dataset(str(root), split_parts=[("train", "media_")])
    return root


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_media_shards(tmp_path_factory.mktemp("media_meta") / "ds")
    result = CliRunner().invoke(
        cli, ["prepare-media", str(root), "--media-metadata-by-extension", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "Stored metadata of 5 media files from 2 shards" in result.output
    assert "media_1.tar/s2.mp4" in result.output  # the corrupt one is reported
    return root


def test_records_hold_true_video_audio_and_image_facts(shards: Path) -> None:
    video = get_media_metadata(str(shards), "s0.mp4")
    assert video == AVMetadata(
        video_duration=2.0,
        video_num_frames=60,
        video_fps=30.0,
        video_width=64,
        video_height=48,
        audio_duration=video.audio_duration,
        audio_channels=1,
        audio_sample_rate=16000,
        audio_num_samples=video.audio_num_samples,
    )
    assert video.audio_duration == pytest.approx(2.0, abs=0.07)  # AAC pads the last frame
    flac = get_media_metadata(str(shards), "s1.flac")
    assert (flac.audio_num_samples, flac.audio_duration, flac.video_fps) == (32000, 2.0, None)
    assert get_media_metadata(str(shards), "s3.wav").audio_num_samples == 8000
    assert get_media_metadata(str(shards), "s2.png") == ImageMetadata(5, 7, "PNG", "RGB")
    for missing in ("s0.json", "s1.bin", "s2.mp4"):  # not media by extension; corrupt
        with pytest.raises(SampleError, match=missing):
            get_media_metadata(str(shards), missing)


def test_table_has_energons_schema(shards: Path) -> None:
    db = sqlite3.connect(shards / ".nv-meta" / "index.sqlite")
    columns = [row[1:3] for row in db.execute("PRAGMA table_info(media_metadata)")]
    assert columns == [("entry_key", "TEXT"), ("metadata_type", "TEXT"), ("metadata_json", "TEXT")]
    assert db.execute("SELECT strategy, patterns FROM media_filters").fetchall() == [
        ("EXTENSION", "")
    ]
    row = db.execute("SELECT * FROM media_metadata WHERE entry_key = 's0.png'").fetchone()
    assert row == ("s0.png", "image", '{"width":8,"height":6,"format":"PNG","mode":"RGB"}')
    assert db.execute("SELECT COUNT(*) FROM samples").fetchone() == (4,)  # the index is intact


@pytest.mark.parametrize(
    ("flag", "stored"),
    [
        (["--media-metadata-by-glob", "*.mp4,*.wav"], {"s0.mp4", "s3.wav"}),
        (
            ["--media-metadata-by-header"],
            {"s0.mp4", "s0.png", "s1.flac", "s1.bin", "s2.png", "s3.wav"},
        ),
    ],
)
def test_glob_and_header_filters(tmp_path: Path, flag: list[str], stored: set[str]) -> None:
    root = write_media_shards(tmp_path / "ds")
    result = CliRunner().invoke(cli, ["prepare-media", str(root), *flag, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["files"] == len(stored)
    db = sqlite3.connect(root / ".nv-meta" / "index.sqlite")
    assert {row[0] for row in db.execute("SELECT entry_key FROM media_metadata")} == stored


def test_prepare_with_media_flag_in_one_go(tmp_path: Path) -> None:
    root = write_media_shards(tmp_path / "ds", prepare=False)
    result = CliRunner().invoke(
        cli,
        [
            "prepare",
            str(root),
            "--non-interactive",
            "--split-ratio",
            "1,0,0",
            "--no-progress",
            "--media-metadata-by-glob",
            "*.flac",
        ],
    )
    assert result.exit_code == 0, result.output
    assert get_media_metadata(str(root), "s1.flac").audio_sample_rate == 16000


def test_bad_flags_and_unprepared_dataset(tmp_path: Path) -> None:
    root = write_media_shards(tmp_path / "ds", prepare=False)
    two = CliRunner().invoke(
        cli,
        ["prepare-media", str(root), "--media-metadata-by-header", "--media-metadata-by-extension"],
    )
    assert two.exit_code == 2 and "exactly one media filter" in two.output
    with pytest.raises(ConfigError, match="not prepared"):
        prepare_media(str(root), MediaFilter.parse(extension=True))


def test_failed_run_leaves_the_dataset_as_it_was(tmp_path: Path) -> None:
    root = write_media_shards(tmp_path / "ds")
    before = snapshot(root)
    shard = root / "media_1.tar"
    shard.write_bytes(shard.read_bytes()[:1500])  # truncated: the probe of this shard fails
    before["media_1.tar"] = shard.read_bytes()
    result = CliRunner().invoke(cli, ["prepare-media", str(root), "--media-metadata-by-extension"])
    assert result.exit_code == 2 and "truncated" in result.output
    assert snapshot(root) == before  # no new index, no temporary files left


def test_command_does_not_import_torch(tmp_path: Path) -> None:
    root = write_media_shards(tmp_path / "ds")
    code = textwrap.dedent("""
        import sys
        from stoker.cli.main import cli
        try:
            cli(["prepare-media", sys.argv[1], "--media-metadata-by-extension", "--no-progress"])
        except SystemExit:
            pass
        print("torch" in sys.modules)
    """)
    result = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
    help_text = subprocess.run(
        [*STOKER, "prepare-media", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--media-metadata-by-glob" in help_text and "index.sqlite" in help_text


class PlansByDuration(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Reads the stored duration instead of decoding (e.g. to group clips by length)."""

    def encode_sample(self, sample: Any) -> Any:
        meta = sample.get_media_metadata("mp4")
        return type(sample).derive_from(sample, video=meta.video_duration, context=sample.context)


def test_task_encoder_reads_metadata_in_workers(tmp_path: Path) -> None:
    root = tmp_path / "vid"
    video = make_video("mp4", frames=45, audio=False)
    write_shard(root / "v_0.tar", [(f"k{i}", {"mp4": video, "txt": b"q"}) for i in range(4)])
    field_map = {"video": "mp4", "context": "txt"}
    prepare_dataset(
        str(root),
        split_parts=[("train", "v_")],
        dataset_yaml=make_dataset_yaml("VidQASample", field_map),
    )
    prepare_media(str(root), MediaFilter.parse(extension=True))
    dataset = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2,
        shuffle_buffer_size=2,
        max_samples_per_sequence=2,
        task_encoder=PlansByDuration(),
        repeat=False,
    )
    with get_loader(dataset) as loader:
        durations = [float(d) for batch in loader for d in batch.video]
    assert durations == [1.5] * 4


@pytest.mark.energon
def test_energon_reads_the_records(shards: Path) -> None:
    pytest.importorskip("megatron.energon")
    code = textwrap.dedent("""
        import json, sys
        from megatron.energon.cache.file_store import WebdatasetFileStore
        from megatron.energon.epathlib import EPath
        store = WebdatasetFileStore(EPath(sys.argv[1]))
        out = {k: store.get_media_metadata(k).to_dict() for k in ("s0.mp4", "s1.flac", "s0.png")}
        print(json.dumps(out))
    """)
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, str(shards)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["s0.mp4"]["video_fps"] == 30.0 and got["s0.mp4"]["video_num_frames"] == 60
    assert got["s1.flac"]["audio_num_samples"] == 32000
    assert got["s0.png"] == {"width": 8, "height": 6, "format": "PNG", "mode": "RGB"}
