"""AVDecoder as a part decoder: modes, pickling, bounded cost and bad media as sample errors."""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys

import av
import pytest

from stoker.errors import SampleError
from stoker.media.av_data import AVData
from stoker.media.av_decoder import AVDecoder
from stoker.media.limits import AVLimits
from stoker.pipeline.decode import SampleDecoder
from tests.integration._media import frame_numbers, make_audio, make_video


@functools.cache
def mp4() -> bytes:
    return make_video("mp4")


def test_default_mode_is_a_lazy_decoder_that_pickles() -> None:
    decoder = SampleDecoder().decode_part("k", "mp4", mp4())
    assert isinstance(decoder, AVDecoder)
    assert decoder.get_video_fps() == 30.0  # indexes the packets
    copy = pickle.loads(pickle.dumps(decoder))
    clip = copy.get_video_clips([(10, 12)], "frames")[0][0]
    assert frame_numbers(clip) == [10, 11, 12]


def test_torch_mode_decodes_everything() -> None:
    data = SampleDecoder(av_decode="torch").decode_part("k", "clip.mp4", mp4())
    assert isinstance(data, AVData) and data.video_clips is not None
    assert data.video_clips[0].shape == (60, 3, 48, 64) and data.audio_clips == []
    with_audio = SampleDecoder(av_decode="torch", video_decode_audio=True).decode_part(
        "k", "mp4", mp4()
    )
    assert with_audio.audio_clips[0].shape[0] == 1
    audio = SampleDecoder(av_decode="torch").decode_part("k", "flac", make_audio("flac"))
    assert audio.video_clips == [] and audio.audio_clips[0].shape == (1, 32000)


def test_pyav_mode_gives_an_open_container() -> None:
    container = SampleDecoder(av_decode="pyav").decode_part("k", "mp4", mp4())
    try:
        assert isinstance(container, av.container.InputContainer)
        assert container.streams.video[0].codec_context.thread_type.name == "NONE"
    finally:
        container.close()


def test_stream_queries() -> None:
    decoder = AVDecoder(mp4())
    assert decoder.has_video_stream() and decoder.has_audio_stream()
    assert decoder.get_video_duration(get_frame_count=True) == (pytest.approx(2.0), 60)
    assert decoder.get_audio_samples_per_second() == 16000
    assert decoder.get_audio_duration() == pytest.approx(2.0, abs=0.07)  # + AAC padding
    audio_only = AVDecoder(make_audio("wav"))
    assert not audio_only.has_video_stream()
    with pytest.raises(SampleError, match="no video fps"):
        audio_only.get_video_fps()
    with pytest.raises(SampleError, match="no video stream"):
        audio_only.get_video()


def test_range_past_the_end_is_left_out_as_in_energon() -> None:
    decoder = AVDecoder(mp4())  # 60 frames at 30 fps, 2 s of audio
    clips, times = decoder.get_video_clips([(0.0, 0.1), (2.5, 3.0), (1.9, 9.0)])
    assert [frame_numbers(c) for c in clips] == [[0, 1, 2, 3], [57, 58, 59]]
    assert len(times) == 2 and times[1][1] == pytest.approx(2.0)
    by_frames, _ = decoder.get_video_clips([(60, 61), (58, 70)], "frames")
    assert [frame_numbers(c) for c in by_frames] == [[58, 59]]
    audio, audio_times = decoder.get_audio_clips([(3.0, 4.0), (1.5, 9.0)])
    assert len(audio) == 1 and audio_times[0][0] == pytest.approx(1.5)
    assert decoder.get_clips(video_clip_ranges=[(5.0, 6.0)]).video_clips == []


def test_limits_refuse_before_decoding() -> None:
    small = AVDecoder(mp4(), limits=AVLimits(max_clip_frames=10, max_frame_pixels=64 * 48))
    assert len(small.get_video_clips([(0, 9)], "frames")[0][0]) == 10
    with pytest.raises(SampleError, match="max_clip_frames"):
        small.get_video_clips([(0, 10)], "frames")
    with pytest.raises(SampleError, match="max_frame_pixels"):
        small.get_video_clips([(0, 1)], "frames", video_out_frame_size=(128, 96))
    with pytest.raises(SampleError, match="max_clip_seconds"):
        AVDecoder(mp4(), limits=AVLimits(max_clip_seconds=0.5)).get_audio()
    with pytest.raises(SampleError, match="max_output_bytes"):
        AVDecoder(mp4(), limits=AVLimits(max_output_bytes=10**5)).get_video()


@pytest.mark.parametrize(
    "data",
    [b"not a video at all" * 10, mp4()[: len(mp4()) // 2], mp4()[:100], b""],
    ids=["garbage", "truncated-half", "truncated-header", "empty"],
)
def test_bad_media_is_a_sample_error(data: bytes) -> None:
    decoder = SampleDecoder().decode_part("k", "mp4", data)
    with pytest.raises(SampleError):
        decoder.get_video_clips([(0, 59)], "frames")
    with pytest.raises(SampleError):
        SampleDecoder(av_decode="torch").decode_part("k", "mp4", data)


def test_unsupported_codec_is_a_sample_error() -> None:
    # A stream whose codec id FFmpeg has no decoder for: the first bytes of the 'avc1' box's
    # sample entry renamed to an unknown four-character code.
    data = mp4().replace(b"avc1", b"zzzz")
    with pytest.raises(SampleError):
        AVDecoder(data).get_video_clips([(0, 3)], "frames")


def test_importing_the_decoder_module_does_not_load_pyav() -> None:
    code = (
        "import sys, stoker, stoker.pipeline.decode\n"
        "from stoker.pipeline.decode import SampleDecoder\n"
        "d = SampleDecoder().decode_part('k', 'mp4', b'x')\n"
        "print('av' in sys.modules, type(d).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "AVDecoder"]


def test_decoded_frames_are_bounded_even_before_a_clip() -> None:
    # Frame 59 needs the frames from its keyframe (48) on: 12 decoded frames at least.
    decoder = AVDecoder(mp4(), limits=AVLimits(max_decoded_frames=8))
    with pytest.raises(SampleError, match="max_decoded_frames"):
        decoder.get_video_clips([(59, 59)], "frames")
    assert len(AVDecoder(mp4()).get_video_clips([(59, 59)], "frames")[0][0]) == 1


def test_keep_open_serves_calls_from_one_container() -> None:
    decoder = AVDecoder(mp4())
    with decoder.keep_open():
        first = decoder.get_video_clips([(3, 4)], "frames")[0][0]
        audio = decoder.get_audio_clips([(0, 100)], "samples")[0][0]
        copy = pickle.loads(pickle.dumps(decoder))  # the open container is not pickled
        last = decoder.get_video_clips([(1.9, 2.0)])[0][0]
    assert frame_numbers(first) == [3, 4] and frame_numbers(last) == [57, 58, 59]
    assert audio.shape == (1, 100)
    assert frame_numbers(copy.get_video_clips([(7, 7)], "frames")[0][0]) == [7]
