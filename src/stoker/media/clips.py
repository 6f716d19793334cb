"""Decoded clips as tensors with their times: video ``(T, C, H, W)`` uint8, audio ``(C, S)``.

The glue between an open container and :class:`~stoker.media.av_data.AVData`: ranges become
frame or sample spans (:mod:`.video`, :mod:`.audio`), spans become arrays, arrays tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from stoker.media.audio import AudioUnit, decode_samples, sample_spans
from stoker.media.container import first_stream
from stoker.media.limits import AVLimits
from stoker.media.probe import StreamIndex, require_frames
from stoker.media.video import VideoUnit, decode_spans, frame_spans

if TYPE_CHECKING:
    from av.container import InputContainer

Ranges = Sequence[tuple[float, float]]
#: (clips, (start, end) seconds of each clip)
Clips = tuple[list[torch.Tensor], list[tuple[float, float]]]


def video_clips(
    container: InputContainer,
    index: StreamIndex | None,
    ranges: Ranges,
    unit: VideoUnit,
    size: tuple[int, int] | None,
    limits: AVLimits,
) -> Clips:
    """One ``(T, 3, H, W)`` uint8 RGB tensor per range of the first video stream."""
    first_stream(container, "video")
    index = require_frames(index, "video")
    spans = frame_spans(index, ranges, unit)
    arrays = decode_spans(container, index, spans, size, limits)
    times = [
        (index.seconds(s.first), index.end_seconds(s.first + len(a) - 1))
        for s, a in zip(spans, arrays, strict=True)
    ]
    # Transposed by numpy: one thread and fast, whatever torch's thread settings are.
    chw = [torch.from_numpy(np.ascontiguousarray(a.transpose(0, 3, 1, 2))) for a in arrays]
    return chw, times


def audio_clips(
    container: InputContainer,
    index: StreamIndex | None,
    ranges: Ranges,
    unit: AudioUnit,
    limits: AVLimits,
) -> Clips:
    """One ``(channels, samples)`` tensor per range of the first audio stream."""
    rate = int(first_stream(container, "audio").sample_rate)
    index = require_frames(index, "audio")
    spans = sample_spans(index, rate, ranges, unit)
    decoded = decode_samples(container, index, spans, limits)
    times = [(s / rate, (s + a.shape[1]) / rate) for s, a in decoded]
    return [torch.from_numpy(np.ascontiguousarray(a)) for _, a in decoded], times
