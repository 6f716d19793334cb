"""AVDecoder against the real Energon on the same bytes: exact audio sample counts, metadata
flags, clip ranges past the end, and uniform audio clips of one length.
"""

from __future__ import annotations

import functools
import io
from typing import Any

import pytest
import torch

from stoker.media.av_decoder import AVDecoder
from stoker.media.uniform import get_clips_uniform, get_single_frames_uniform
from tests.integration._media import frame_numbers, make_audio, make_textured_video, make_video

pytestmark = pytest.mark.energon


@functools.cache
def media(kind: str) -> bytes:
    return make_video(kind) if kind in ("mp4", "mkv", "webm", "avi") else make_audio(kind)


def energon_decoder(data: bytes) -> Any:
    av = pytest.importorskip("megatron.energon.av")
    return av.AVDecoder(io.BytesIO(data), suppress_warnings=True)


@pytest.mark.parametrize("kind", ["mp4", "webm", "mkv", "mp3", "m4a", "ogg", "wav"])
def test_audio_num_samples_is_counted_as_energon_counts_it(kind: str) -> None:
    theirs = energon_decoder(media(kind)).get_metadata(get_audio_num_samples=True)
    ours = AVDecoder(media(kind)).get_metadata(get_audio_num_samples=True)
    assert ours.audio_num_samples == theirs.audio_num_samples
    assert (ours.audio_sample_rate, ours.audio_channels) == (
        theirs.audio_sample_rate,
        theirs.audio_channels,
    )
    assert ours.video_num_frames == theirs.video_num_frames
    assert ours.audio_duration == pytest.approx(theirs.audio_duration, abs=1e-3)


def test_metadata_flags_leave_fields_out_as_energon() -> None:
    decoder = AVDecoder(media("mp4"))
    no_video = decoder.get_metadata(get_video=False)
    assert no_video.video_fps is None and no_video.video_num_frames is None
    assert no_video.audio_sample_rate == 16000
    no_audio = decoder.get_metadata(get_audio=False)
    assert no_audio.audio_sample_rate is None and no_audio.video_fps == 30.0
    assert decoder.get_metadata().video_num_frames == 60  # the cache is left whole


def flat(times: list[tuple[float, float]]) -> list[float]:
    return [t for pair in times for t in pair]


#: Each range on its own: Energon's reader keeps its position between the ranges of one call,
#: and a range past the end leaves it there, which loses later ranges in some containers.
VIDEO_RANGES = [((2.5, 3.0), "seconds"), ((1.9, 9.0), "seconds"), ((0.0, 0.1), "seconds")]
VIDEO_RANGES += [((60, 61), "frames"), ((58, 70), "frames"), ((0, 2), "frames")]


@pytest.mark.parametrize("kind", ["mp4", "avi"])
@pytest.mark.parametrize(("clip", "unit"), VIDEO_RANGES)
def test_video_ranges_past_the_end_as_energon(
    kind: str, clip: tuple[float, float], unit: str
) -> None:
    theirs, their_times = energon_decoder(media(kind)).get_video_clips([clip], video_unit=unit)
    ours, our_times = AVDecoder(media(kind)).get_video_clips([clip], unit)  # type: ignore[arg-type]
    assert [frame_numbers(c) for c in ours] == [frame_numbers(c) for c in theirs]
    assert flat(our_times) == pytest.approx(flat(their_times))


def test_several_ranges_with_one_past_the_end_as_energon() -> None:
    ranges = [(0.0, 0.1), (2.5, 3.0), (1.9, 9.0)]  # mp4: Energon keeps the third
    theirs, their_times = energon_decoder(media("mp4")).get_video_clips(ranges)
    ours, our_times = AVDecoder(media("mp4")).get_video_clips(ranges)
    assert [frame_numbers(c) for c in ours] == [frame_numbers(c) for c in theirs]
    assert flat(our_times) == pytest.approx(flat(their_times))


@pytest.mark.parametrize("kind", ["wav", "flac", "ogg"])
@pytest.mark.parametrize("clip", [(3.0, 4.0), (1.5, 9.0), (0.25, 0.5)])
def test_audio_ranges_past_the_end_as_energon(kind: str, clip: tuple[float, float]) -> None:
    theirs, their_times = energon_decoder(media(kind)).get_audio_clips([clip])
    ours, our_times = AVDecoder(media(kind)).get_audio_clips([clip])
    assert [c.shape for c in ours] == [c.shape for c in theirs]
    assert flat(our_times) == pytest.approx(flat(their_times), abs=1e-3)


@pytest.mark.parametrize("kind", ["mp4", "ogg", "mp3", "m4a", "wav"])
@pytest.mark.parametrize(("seconds", "count"), [(0.3, 5), (0.07, 9), (1.0, 3)])
def test_uniform_audio_clips_have_one_length(kind: str, seconds: float, count: int) -> None:
    decoder = AVDecoder(media(kind))
    rate = decoder.get_audio_samples_per_second()
    data = get_clips_uniform(decoder, seconds, count, request_audio=True)
    assert data.audio_clips is not None and len(data.audio_clips) == count
    assert {c.shape[1] for c in data.audio_clips} == {round(seconds * rate)}
    starts = [start for start, _ in data.audio_timestamps or []]
    assert starts == sorted(starts) and 0.0 <= starts[0] < 0.1  # MP3 audio starts at 0.069 s


#: Not hevc: its keyframes here open groups of pictures whose first frames (in display order)
#: come after the keyframe in decode order, and Energon's frame counting after a seek then
#: returns other frames than those it asks for (and 6 of 7); stoker's equal a plain decode of
#: every frame (tests/unit/test_av_exact.py).
@pytest.mark.parametrize(("codec", "fmt"), [("h264", "mp4"), ("h264", "matroska")])
@pytest.mark.parametrize("size", [None, (40, 30)])
def test_uniform_frames_are_energon_frames_pixel_for_pixel(
    codec: str, fmt: str, size: tuple[int, int] | None
) -> None:
    """The same frames (Energon's choice) with the same swscale bilinear resize."""
    data = make_textured_video(codec, fmt=fmt)
    energon = pytest.importorskip("megatron.energon.av")
    for n in (1, 7, 8, 48):
        theirs, their_starts = energon.get_single_frames_uniform(
            energon_decoder(data), n, video_out_frame_size=size, return_timestamps=True
        )
        ours, starts = get_single_frames_uniform(
            AVDecoder(data), n, video_out_frame_size=size, return_timestamps=True
        )
        assert starts == pytest.approx(their_starts, abs=1e-3)
        assert torch.equal(ours, theirs)
