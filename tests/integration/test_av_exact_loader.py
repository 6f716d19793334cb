"""Clips made in the loader's worker processes are, pixel for pixel, the frames a plain decode
of every frame of the video gives, at the frames Energon picks; W=0 and W=2 (real workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    VidQASample,
    WorkerConfig,
    get_loader,
    get_single_frames_uniform,
    get_train_dataset,
)
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import write_shard
from tests.integration._media import decode_every_frame, make_textured_video

FRAMES, SIZE = 6, (40, 30)


class FramesEncoder(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: VidQASample) -> VidQASample:
        frames = get_single_frames_uniform(sample.video, FRAMES, video_out_frame_size=SIZE)
        return VidQASample.derive_from(sample, video=frames, context=sample.context)


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """Two shards of h264 and hevc mp4s of 30 to 47 frames, prepared as VidQASample."""
    root = tmp_path_factory.mktemp("exact") / "videos"
    data: dict[str, bytes] = {}
    for s in range(2):
        samples = []
        for j in range(3):
            key = f"v{s}{j}"
            data[key] = make_textured_video(("h264", "hevc")[j % 2], frames=30 + 6 * j + s)
            samples.append((key, {"mp4": data[key], "txt": b"what moves?"}))
        write_shard(root / f"videos_{s}.tar", samples)
    prepare_dataset(
        str(root),
        split_ratio=[("train", 1.0)],
        dataset_yaml=make_dataset_yaml("VidQASample", {"video": "mp4", "context": "txt"}),
    )
    return root, data


def expected(data: bytes) -> torch.Tensor:
    """Energon's frames (``int(start * fps)`` of evenly spread starts), plainly decoded."""
    every = decode_every_frame(data, SIZE)
    starts = np.linspace(0.5 / 30, len(every) / 30 - 0.5 / 30, FRAMES)
    picked = np.stack([every[int(t * 30)] for t in starts])
    return torch.from_numpy(np.ascontiguousarray(picked.transpose(0, 3, 1, 2)))


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_clips_equal_a_decode_of_every_frame(
    videos: tuple[Path, dict[str, bytes]], workers: int
) -> None:
    root, data = videos
    dataset = get_train_dataset(
        str(root),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=2,
        shuffle_buffer_size=4,
        max_samples_per_sequence=2,
        task_encoder=FramesEncoder(),
        repeat=False,
    )
    seen = []
    with get_loader(dataset) as loader:
        for batch in loader:
            for key, clip in zip(batch.__key__, batch.video, strict=True):
                assert clip.dtype == torch.uint8
                assert torch.equal(clip, expected(data[key])), key
                seen.append(key)
    assert sorted(seen) == sorted(data)
