"""Video and audio through the loader: VidQA from mp4 + json shards, audio with transcripts,
media fetched from aux stores, and bad media skipped and reported; real worker processes."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    AVDecoder,
    Cooker,
    DefaultTaskEncoder,
    FileStore,
    Sample,
    TaskEncoder,
    VidQASample,
    WorkerConfig,
    basic_sample_keys,
    get_loader,
    get_single_frames_uniform,
    get_train_dataset,
    stateless,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.media.extract import MediaFilter
from stoker.media.prepare import prepare_media
from tests.conftest import write_shard
from tests.integration._media import frame_numbers, frames_of, make_audio, make_vidqa_dataset

FRAMES = 4
SIZE = (32, 24)


class VidQAEncoder(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Four evenly spaced 32x24 frames of each video (the docs/media.md example)."""

    def encode_sample(self, sample: VidQASample) -> VidQASample:
        frames = get_single_frames_uniform(sample.video, FRAMES, video_out_frame_size=SIZE)
        return VidQASample.derive_from(
            sample, video=frames, context=sample.context, answers=sample.answers
        )


def train(path: Path, workers: int, encoder: Any, batch_size: int = 2) -> Any:
    return get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=batch_size,
        shuffle_buffer_size=4,
        max_samples_per_sequence=2,
        task_encoder=encoder,
        repeat=False,
    )


@pytest.fixture(scope="module")
def vidqa(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("media") / "vidqa"
    return root, make_vidqa_dataset(root)


@pytest.mark.parametrize("workers", [0, 2])
def test_vidqa_end_to_end(vidqa: tuple[Path, list[str]], workers: int) -> None:
    root, keys = vidqa
    seen: list[str] = []
    with get_loader(train(root, workers, VidQAEncoder())) as loader:
        for batch in loader:
            assert isinstance(batch, VidQASample)
            assert batch.video.shape == (len(batch.__key__), FRAMES, 3, SIZE[1], SIZE[0])
            for key, video, answers in zip(batch.__key__, batch.video, batch.answers, strict=True):
                n = frames_of(keys.index(key))
                assert answers == [str(n)]
                assert frame_numbers(video)[0] == 0 and frame_numbers(video)[-1] == n - 1
            assert batch.context == [f"how many frames has {k}?" for k in batch.__key__]
            seen += batch.__key__
    assert sorted(seen) == sorted(keys)


def test_lazy_decoders_cross_worker_processes(vidqa: tuple[Path, list[str]]) -> None:
    root, keys = vidqa
    with get_loader(train(root, 2, DefaultTaskEncoder(), batch_size=3)) as loader:
        videos = [v for batch in loader for v in zip(batch.__key__, batch.video, strict=True)]
    assert len(videos) == len(keys)
    for key, video in videos:
        assert isinstance(video, AVDecoder)
        assert video.get_metadata().video_num_frames == frames_of(keys.index(key))


@pytest.mark.parametrize("workers", [0, 2])
def test_bad_media_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, workers: int
) -> None:
    bad = "clips_b_01"
    keys = make_vidqa_dataset(tmp_path / "ds", corrupt=[bad])
    with (
        caplog.at_level(logging.WARNING, logger="stoker"),
        get_loader(train(tmp_path / "ds", workers, VidQAEncoder())) as loader,
    ):
        seen = [key for batch in loader for key in batch.__key__]
    assert sorted(seen) == sorted(k for k in keys if k != bad)
    if workers == 0:  # worker processes log in their own process
        reports = [r.getMessage() for r in caplog.records if r.name.startswith("stoker")]
        assert len(reports) == 1 and bad in reports[0] and "clips_b.tar" in reports[0], reports


# --- audio with transcripts, cooked from a crude dataset ----------------------------------------
@dataclass(slots=True, kw_only=True)
class AudioSample(Sample):
    audio: torch.Tensor
    num_samples: int
    transcript: str


@stateless
def cook_speech(sample: dict[str, Any]) -> AudioSample:
    clip = sample["flac"].get_audio().audio_clips[0]
    return AudioSample(
        **basic_sample_keys(sample), audio=clip, num_samples=clip.shape[1], transcript=sample["txt"]
    )


class SpeechEncoder(TaskEncoder[Any, Any, Any, Any]):
    cookers = (Cooker(cook_speech),)


def test_audio_with_transcripts(tmp_path: Path) -> None:
    lengths = {f"utt_{i:02d}": 0.5 + 0.25 * i for i in range(5)}
    samples = [
        (key, {"flac": make_audio("flac", seconds=s), "txt": f"said {key}".encode()})
        for key, s in lengths.items()
    ]
    write_shard(tmp_path / "speech" / "speech_0.tar", samples)
    prepare_dataset(
        str(tmp_path / "speech"),
        split_parts=[("train", "speech_")],
        dataset_yaml=make_dataset_yaml("CrudeWebdataset"),
    )
    seen = {}
    with get_loader(train(tmp_path / "speech", 2, SpeechEncoder(), batch_size=5)) as loader:
        for batch in loader:
            assert batch.audio.shape == (len(batch.__key__), 1, max(batch.num_samples))
            for key, n, text in zip(
                batch.__key__, batch.num_samples, batch.transcript, strict=True
            ):
                assert text == f"said {key}"
                seen[key] = int(n)
    assert seen == {key: round(seconds * 16000) for key, seconds in lengths.items()}


# --- media in an aux store -------------------------------------------------------------------
@stateless
def cook_from_aux(sample: dict[str, Any], clips: FileStore) -> VidQASample:
    line = sample["json"]
    video = clips.get(line["video"], sample)  # decoded by extension: an AVDecoder
    frames = clips.get_media_metadata(line["video"]).video_num_frames  # stored: not decoded
    return VidQASample(
        **basic_sample_keys(sample), video=video, context=line["question"], answers=[frames]
    )


class AuxEncoder(TaskEncoder[Any, Any, Any, Any]):
    cookers = (Cooker(cook_from_aux),)

    def encode_sample(self, sample: VidQASample) -> VidQASample:
        clip = sample.video.get_video_clips([(0.5, 0.9)], video_out_frame_size=SIZE)[0][0]
        return VidQASample.derive_from(
            sample, video=clip, context=sample.context, answers=sample.answers
        )


def test_media_in_aux_store(vidqa: tuple[Path, list[str]], tmp_path: Path) -> None:
    source, keys = vidqa
    root = tmp_path / "clips"
    shutil.copytree(source, root)
    prepare_media(str(root), MediaFilter.parse(extension=True))
    lines = [{"video": f"{key}.mp4", "question": key} for key in keys]
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    prepare_jsonl(str(tmp_path / "q.jsonl"))
    (tmp_path / "meta.yaml").write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        f"    path: ./q.jsonl\n    aux:\n      clips: {root}\n"
    )
    seen = []
    with get_loader(train(tmp_path / "meta.yaml", 2, AuxEncoder())) as loader:
        for batch in loader:
            assert batch.video.shape[1:] == (13, 3, SIZE[1], SIZE[0])
            assert all(frame_numbers(v) == list(range(15, 28)) for v in batch.video)
            files = [n for s in batch.__sources__ for src in s for n in src.file_names]
            assert any(n.endswith(".mp4") for n in files)
            assert batch.answers == [[frames_of(keys.index(k))] for k in batch.context]
            seen += batch.context
    assert sorted(seen) == sorted(keys)
