"""Video and audio clips are exact: checked frame by frame (pixel value) and sample by sample."""

from __future__ import annotations

import functools
import io

import pytest
import torch

from stoker.media.av_decoder import AVDecoder
from stoker.media.uniform import get_clips_uniform, get_single_frames_uniform
from tests.integration._media import CODECS, frame_numbers, make_audio, make_video, sine

VIDEO_FORMATS = sorted(CODECS)


@functools.cache
def video(ext: str = "mp4", audio: bool = True) -> bytes:
    return make_video(ext, audio=audio)


@functools.cache
def audio_file(ext: str) -> bytes:
    return make_audio(ext)


@pytest.mark.parametrize("ext", VIDEO_FORMATS)
def test_clip_from_half_to_one_second_holds_frames_15_to_30(ext: str) -> None:
    clips, times = AVDecoder(io.BytesIO(video(ext))).get_video_clips([(0.5, 1.0)])
    assert len(clips) == 1 and clips[0].dtype == torch.uint8
    assert clips[0].shape == (16, 3, 48, 64)
    assert frame_numbers(clips[0]) == list(range(15, 31))
    assert times[0] == pytest.approx((0.5, 31 / 30), abs=1e-3)  # mkv: millisecond timestamps


@pytest.mark.parametrize("ext", VIDEO_FORMATS)
def test_metadata_reports_true_fps_frames_and_duration(ext: str) -> None:
    meta = AVDecoder(video(ext)).get_metadata()
    assert meta.video_fps == 30.0 and meta.video_num_frames == 60
    assert meta.video_duration == pytest.approx(2.0, abs=1e-3)
    assert (meta.video_width, meta.video_height) == (64, 48)
    assert meta.audio_sample_rate == CODECS[ext][3] and meta.audio_channels == 1


@pytest.mark.parametrize("ext", VIDEO_FORMATS)
def test_clips_by_frames_and_seconds_in_any_order(ext: str) -> None:
    decoder = AVDecoder(video(ext))
    by_frames, _ = decoder.get_video_clips([(40, 44), (3, 3), (15, 30), (59, 80)], "frames")
    assert [frame_numbers(c) for c in by_frames] == [
        [40, 41, 42, 43, 44], [3], list(range(15, 31)), [59],
    ]  # fmt: skip
    # Inside a frame's display time: that frame; a zero-length range: one frame.
    by_seconds, _ = decoder.get_video_clips([(0.51, 0.52), (1.0, 1.0), (0.0, 0.1)])
    assert [frame_numbers(c) for c in by_seconds] == [[15], [30], [0, 1, 2, 3]]


def test_whole_video_and_resize() -> None:
    decoder = AVDecoder(video("mkv"))
    whole = decoder.get_video()
    assert whole.video_clips is not None and whole.audio_clips == []
    assert frame_numbers(whole.video_clips[0]) == list(range(60))
    small, _ = decoder.get_video_clips([(0, 2)], "frames", video_out_frame_size=(32, 20))
    assert small[0].shape == (3, 3, 20, 32)
    assert frame_numbers(small[0]) == [0, 1, 2]


@pytest.mark.parametrize("ext", ["wav", "flac", "mp3", "ogg", "m4a", "aac"])
def test_half_second_audio_clip_holds_8000_samples_at_16k(ext: str) -> None:
    decoder = AVDecoder(audio_file(ext))
    rate = decoder.get_audio_samples_per_second()
    clips, times = decoder.get_audio_clips([(0.5, 1.0)])
    assert clips[0].shape[0] == 1
    assert abs(clips[0].shape[1] - rate // 2) <= 1152  # at most one codec frame off
    assert times[0][0] == pytest.approx(0.5)
    if ext in ("wav", "flac"):  # lossless: exact count and the same sine, to the sample
        assert clips[0].shape == (1, rate // 2)
        expected = torch.from_numpy(sine(rate, rate)[:, rate // 2 :])
        got = clips[0].float() / (32768 if clips[0].dtype == torch.int16 else 1)
        assert torch.allclose(got, expected, atol=1e-3)


def test_audio_by_samples_and_whole() -> None:
    decoder = AVDecoder(audio_file("flac"))
    clips, times = decoder.get_audio_clips([(100, 1124), (31000, 40000)], audio_unit="samples")
    assert [c.shape[1] for c in clips] == [1024, 1000]  # the second one stops at the end
    assert times[1] == (31000 / 16000, 2.0)
    whole = decoder.get_audio()
    assert whole.audio_clips is not None and whole.audio_clips[0].shape == (1, 32000)
    assert decoder.get_metadata().audio_num_samples == 32000


def test_video_with_audio_in_one_call() -> None:
    data = AVDecoder(video("mp4")).get_clips(
        video_clip_ranges=[(0.5, 1.0)], audio_clip_ranges=[(0.5, 1.0)]
    )
    assert data.video_clips is not None and data.audio_clips is not None
    assert frame_numbers(data.video_clips[0]) == list(range(15, 31))
    assert data.audio_clips[0].shape == (1, 8000)


def test_uniform_clips_and_single_frames() -> None:
    decoder = AVDecoder(video("mp4"))
    frames, starts = get_single_frames_uniform(decoder, 5, return_timestamps=True)
    assert frames.shape == (5, 3, 48, 64)
    assert frame_numbers(frames) == [0, 15, 30, 44, 59]
    assert starts == pytest.approx([0, 0.5, 1.0, 44 / 30, 59 / 30])
    data = get_clips_uniform(decoder, 0.2, 3, request_video=True, request_audio=True)
    assert data.video_clips is not None and data.audio_clips is not None
    assert [frame_numbers(c)[0] for c in data.video_clips] == [0, 27, 54]
    assert [len(c) for c in data.video_clips] == [7, 7, 6]  # the last one ends at 2.0 s
    assert [c.shape[1] for c in data.audio_clips] == [3200, 3200, 3200]
    with pytest.raises(ValueError, match="request_video"):
        get_clips_uniform(decoder, 1.0, 2)
