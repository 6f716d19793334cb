"""Evenly spread clips and single frames over a video, as Energon's helpers of the same names.

Example:
    >>> import io
    >>> from stoker.media.av_decoder import AVDecoder
    >>> decoder = AVDecoder(io.BytesIO(mp4_bytes))
    >>> frames = get_single_frames_uniform(
    ...     decoder, 8, video_out_frame_size=(224, 224)
    ... )
    >>> frames.shape
    torch.Size([8, 3, 224, 224])
"""

from __future__ import annotations

from typing import Literal, overload

import numpy as np
import numpy.typing as npt
import torch

from stoker.errors import SampleError
from stoker.media.av_data import AVData
from stoker.media.av_decoder import AVDecoder
from stoker.media.metadata import AVMetadata


def get_clips_uniform(
    av_decoder: AVDecoder,
    clip_duration_seconds: float,
    num_clips: int,
    request_video: bool = False,
    request_audio: bool = False,
    video_out_frame_size: tuple[int, int] | None = None,
) -> AVData:
    """``num_clips`` clips of ``clip_duration_seconds`` each, evenly spaced, first at 0 s.

    The last clip ends at the end of the shorter of the requested streams. A duration of 0
    asks for single frames, centred on frames, from the first frame to the last. Audio clips
    all hold ``round(clip_duration_seconds * sample_rate)`` samples.
    """
    if not request_video and not request_audio:
        raise ValueError("get_clips_uniform: pass request_video=True and/or request_audio=True.")
    if num_clips < 1:
        raise ValueError(f"get_clips_uniform: {num_clips=} must be at least 1.")
    with av_decoder.keep_open():
        return _uniform(
            av_decoder,
            clip_duration_seconds,
            num_clips,
            request_video,
            request_audio,
            video_out_frame_size,
        )


def _uniform(
    av_decoder: AVDecoder,
    clip_duration_seconds: float,
    num_clips: int,
    request_video: bool,
    request_audio: bool,
    video_out_frame_size: tuple[int, int] | None,
) -> AVData:
    meta = av_decoder.get_metadata()
    durations = [
        d
        for wanted, d in (
            (request_video, meta.video_duration),
            (request_audio, meta.audio_duration),
        )
        if wanted
    ]
    if any(d is None for d in durations):
        raise SampleError("the media lacks a requested stream.", hint="Check has_*_stream() first.")
    total = min(d for d in durations if d is not None)
    first, last = 0.0, total - clip_duration_seconds
    if clip_duration_seconds == 0:
        half_frame = 0.5 / av_decoder.get_video_fps()
        first, last = half_frame, total - half_frame
    starts = np.linspace(first, max(first, last), num_clips)
    ranges = [(float(t), float(t) + clip_duration_seconds) for t in starts]
    audio = _audio_sample_ranges(meta, starts, clip_duration_seconds) if request_audio else None
    data = av_decoder.get_clips(
        video_clip_ranges=ranges if request_video else None,
        audio_clip_ranges=audio,
        audio_unit="samples",
        video_out_frame_size=video_out_frame_size,
    )
    if audio:
        _realign_short(av_decoder, data, audio)
    return data


def _realign_short(av_decoder: AVDecoder, data: AVData, ranges: list[tuple[float, float]]) -> None:
    """Clips cut short by where the audio starts or ends, read again inside the audio.

    Container durations include encoder delay and padding that decode to nothing (AAC, MP3),
    so the true extent is only known once decoded; such a clip moves to start where the audio
    starts, or to end where it ends, and holds the same number of samples as the others.
    """
    clips, times = data.audio_clips or [], data.audio_timestamps or []
    rate = av_decoder.get_audio_samples_per_second()
    for i, (clip, (first, end)) in enumerate(zip(clips, ranges, strict=True)):
        length = round(end - first)
        if clip.shape[1] >= length:
            continue
        began, ended = round(times[i][0] * rate), round(times[i][1] * rate)
        start = began if began > first else max(ended - length, 0)
        again, when = av_decoder.get_audio_clips([(start, start + length)], "samples")
        if again:
            clips[i], times[i] = again[0], when[0]


def _audio_sample_ranges(
    meta: AVMetadata, starts: npt.NDArray[np.float64], seconds: float
) -> list[tuple[float, float]]:
    """Sample ranges of one length for clips starting at ``starts``, all inside the audio.

    Rounding each end on its own could make clips differ by a sample, and the last one could
    end a sample past the stream; here every clip has ``round(seconds * rate)`` samples.
    """
    rate = meta.audio_sample_rate or 0
    length = max(round(seconds * rate), 1)
    total = meta.audio_num_samples or round((meta.audio_duration or 0.0) * rate)
    firsts = [min(round(float(t) * rate), max(total - length, 0)) for t in starts]
    return [(float(f), float(f + length)) for f in firsts]


@overload
def get_single_frames_uniform(
    av_decoder: AVDecoder,
    num_frames: int,
    *,
    video_out_frame_size: tuple[int, int] | None = None,
    return_timestamps: Literal[False] = False,
) -> torch.Tensor: ...


@overload
def get_single_frames_uniform(
    av_decoder: AVDecoder,
    num_frames: int,
    *,
    video_out_frame_size: tuple[int, int] | None = None,
    return_timestamps: Literal[True],
) -> tuple[torch.Tensor, list[float]]: ...


def get_single_frames_uniform(
    av_decoder: AVDecoder,
    num_frames: int,
    *,
    video_out_frame_size: tuple[int, int] | None = None,
    return_timestamps: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, list[float]]:
    """``num_frames`` evenly spaced frames as one ``(num_frames, 3, H, W)`` uint8 tensor.

    With ``return_timestamps=True``, also the start time of each frame in seconds.
    """
    data = get_clips_uniform(
        av_decoder, 0, num_frames, request_video=True, video_out_frame_size=video_out_frame_size
    )
    clips, times = data.video_clips or [], data.video_timestamps or []
    # Joined by numpy: one thread, whatever torch's thread settings are (torch.cat may spin
    # up its thread pool for a few MB).
    frames = torch.from_numpy(np.concatenate([clip.numpy() for clip in clips]))
    return (frames, [start for start, _ in times]) if return_timestamps else frames
