"""Frames stoker decodes are the frames a plain decode of every frame gives, pixel for pixel.

stoker decodes only what a clip needs (one pass per group of pictures, frames nothing refers
to skipped on the way, nothing after the last wanted frame), so these compare its clips with a
reference that decodes every frame of the file with PyAV and converts it the same way.
"""

from __future__ import annotations

import functools
import io
import random
from typing import Any

import av
import numpy as np
import pytest
import torch

from stoker.errors import SampleError
from stoker.media.av_decoder import AVDecoder
from stoker.media.limits import AVLimits
from stoker.media.uniform import get_single_frames_uniform
from tests.integration._media import decode_every_frame, make_textured_video

#: (codec, container) of the videos under test; h264 and hevc have frames nothing refers to.
UNIFORM_KINDS = [("h264", "mp4"), ("hevc", "mp4"), ("h264", "matroska"), ("vp9", "webm")]
#: ... and MPEG-TS, whose timeline starts later (so only frame ranges are compared): its seeks
#: land after the keyframe (read from the start instead); HEVC's Annex B headers there do not
#: say how many temporal sub-layers there are (nothing is skipped)
KINDS = [*UNIFORM_KINDS, ("h264", "mpegts"), ("hevc", "mpegts")]
SIZE = (40, 30)


@functools.cache
def video(codec: str, fmt: str) -> bytes:
    return make_textured_video(codec, fmt=fmt)


@functools.cache
def reference(codec: str, fmt: str, size: tuple[int, int] | None) -> np.ndarray[Any, Any]:
    return np.stack(decode_every_frame(video(codec, fmt), size))


def chw(frames: np.ndarray[Any, Any]) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(frames.transpose(0, 3, 1, 2)))


def energon_frame_numbers(frames: int, fps: float, n: int) -> list[int]:
    """The frames Energon's get_single_frames_uniform picks in an mp4: int(start * fps)."""
    starts = np.linspace(0.5 / fps, frames / fps - 0.5 / fps, n)
    return [int(t * fps) for t in starts]


@pytest.mark.parametrize(("codec", "fmt"), UNIFORM_KINDS)
@pytest.mark.parametrize("size", [None, SIZE])
def test_uniform_frames_equal_the_reference(
    codec: str, fmt: str, size: tuple[int, int] | None
) -> None:
    ref = reference(codec, fmt, size)
    for n in (1, 5, 8, 48):
        got, starts = get_single_frames_uniform(
            AVDecoder(video(codec, fmt)), n, video_out_frame_size=size, return_timestamps=True
        )
        picked = energon_frame_numbers(len(ref), 30.0, n)
        assert [round(t * 30) for t in starts] == picked
        assert torch.equal(got, chw(ref[picked]))


@pytest.mark.parametrize(("codec", "fmt"), KINDS)
def test_clips_in_any_order_overlapping_equal_the_reference(codec: str, fmt: str) -> None:
    ranges = [(30, 40), (5, 5), (0, 13), (11, 12), (47, 60), (20, 35), (36, 36)]
    decoder = AVDecoder(video(codec, fmt))
    for size in (None, SIZE):
        ref = reference(codec, fmt, size)
        clips, _ = decoder.get_video_clips(ranges, "frames", video_out_frame_size=size)
        assert len(clips) == len(ranges)
        for clip, (first, last) in zip(clips, ranges, strict=True):
            assert torch.equal(clip, chw(ref[first : min(last, len(ref) - 1) + 1]))


@pytest.mark.parametrize(("codec", "fmt"), KINDS)
def test_random_frame_sets_equal_the_reference(codec: str, fmt: str) -> None:
    ref = reference(codec, fmt, SIZE)
    rng = random.Random(codec + fmt)
    decoder = AVDecoder(video(codec, fmt))
    for _ in range(6):
        picked = rng.sample(range(len(ref)), rng.randint(1, 10))
        clips, _ = decoder.get_video_clips(
            [(k, k) for k in picked], "frames", video_out_frame_size=SIZE
        )
        assert torch.equal(torch.cat(clips), chw(ref[picked]))


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_the_videos_hold_frames_nothing_refers_to(codec: str) -> None:
    """The comparisons above exercise skipping: FFmpeg drops ~40 % of these frames under NONREF.

    (A video without such frames, as x264 writes for some content, would leave skipping untested.)
    """
    counts = {}
    for skip in ("DEFAULT", "NONREF"):
        with av.open(io.BytesIO(video(codec, "mp4"))) as container:
            container.streams.video[0].codec_context.skip_frame = skip
            counts[skip] = sum(1 for _ in container.decode(video=0))
    assert counts["DEFAULT"] == len(reference(codec, "mp4", SIZE))
    assert counts["NONREF"] <= 0.7 * counts["DEFAULT"]


def test_nothing_after_the_last_wanted_frame_is_decoded() -> None:
    """Frame 0 costs one packet (the keyframe); the last frame of a group of 12, 12 at most."""
    data = video("h264", "mp4")
    one = AVDecoder(data, limits=AVLimits(max_decoded_frames=1))
    assert one.get_video_clips([(0, 0)], "frames")[0][0].shape[0] == 1
    twelve = AVDecoder(data, limits=AVLimits(max_decoded_frames=12))
    clip = twelve.get_video_clips([(11, 11)], "frames", video_out_frame_size=SIZE)[0][0]
    assert torch.equal(clip, chw(reference("h264", "mp4", SIZE)[[11]]))
    with pytest.raises(SampleError, match="max_decoded_frames=1"):
        one.get_video_clips([(1, 1)], "frames")


def test_a_seek_that_misses_its_keyframe_decodes_only_the_group() -> None:
    """MPEG-TS seeks land after the keyframe: the packets before it are demuxed, not decoded."""
    decoder = AVDecoder(video("h264", "mpegts"), limits=AVLimits(max_decoded_frames=12))
    clip = decoder.get_video_clips([(47, 47)], "frames", video_out_frame_size=SIZE)[0][0]
    assert torch.equal(clip, chw(reference("h264", "mpegts", SIZE)[[47]]))


def test_a_decoder_serves_calls_with_one_open_container() -> None:
    """Calls inside keep_open() share one container: its decoder state must not leak."""
    decoder = AVDecoder(video("h264", "mp4"))
    ref = reference("h264", "mp4", None)
    with decoder.keep_open():
        late, _ = decoder.get_video_clips([(40, 41)], "frames")
        early, _ = decoder.get_video_clips([(2, 3)], "frames")
        again, _ = decoder.get_video_clips([(40, 41)], "frames")
    assert torch.equal(late[0], chw(ref[40:42])) and torch.equal(again[0], late[0])
    assert torch.equal(early[0], chw(ref[2:4]))
    stream = io.BytesIO(video("h264", "mp4"))
    assert torch.equal(AVDecoder(stream).get_video_clips([(2, 3)], "frames")[0][0], early[0])
