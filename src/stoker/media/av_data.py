"""``AVData``: decoded clips with their start and end times, as Energon returns them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class AVData:
    """Decoded video and audio clips.

    Attributes:
        video_clips: One ``(frames, channels, height, width)`` uint8 tensor per clip (RGB).
        video_timestamps: ``(start, end)`` seconds of each video clip: the first frame's start
            and the last frame's end.
        audio_clips: One ``(channels, samples)`` tensor per clip.
        audio_timestamps: ``(start, end)`` seconds of each audio clip.

    Example:
        >>> data = AVData(video_clips=[], video_timestamps=[], audio_clips=[], audio_timestamps=[])
        >>> data.video_clips
        []
    """

    video_clips: list[torch.Tensor] | None
    video_timestamps: list[tuple[float, float]] | None
    audio_clips: list[torch.Tensor] | None
    audio_timestamps: list[tuple[float, float]] | None
