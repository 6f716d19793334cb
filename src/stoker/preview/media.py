"""Video and audio in a preview: duration, fps and size, and a strip of frames for the page.

A field decoded lazily (an ``AVDecoder``, Energon's default for video and audio) is summarised
from its container's metadata; with thumbnails, up to :data:`~stoker.preview.thumbnails.MAX_FRAMES`
evenly spaced frames are decoded (one short clip each) into a strip.

Example:
    >>> import io
    >>> from stoker.media.av_decoder import AVDecoder
    >>> summarize_av(AVDecoder(io.BytesIO(mp4_bytes)), thumbnails=True).summary
    'video 10.00 s, 30 fps, 300 frames, 64x48'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stoker.preview.report import FieldSummary
from stoker.preview.thumbnails import MAX_FRAMES, image_data_uri


def summarize_av(decoder: Any, thumbnails: bool) -> FieldSummary:
    """``video``/``audio`` summary of a lazily decoded media field (its error as the summary)."""
    try:
        meta = decoder.get_metadata()
    except Exception as e:  # an undecodable container: say so on this field
        return FieldSummary("object", f"media, unreadable: {type(e).__name__}: {e}")
    parts = []
    video = meta.video_num_frames is not None
    if video:
        parts.append(
            f"video {_seconds(meta.video_duration)}, {_number(meta.video_fps)} fps, "
            f"{meta.video_num_frames} frames, {meta.video_width}x{meta.video_height}"
        )
    if meta.audio_sample_rate is not None:
        parts.append(f"audio {_seconds(meta.audio_duration)}, {meta.audio_sample_rate} Hz")
    summary = "; ".join(parts) or "media without video or audio streams"
    frames: tuple[str, ...] = ()
    if thumbnails and video and meta.video_duration:
        frames = _strip(decoder, float(meta.video_duration))
    return FieldSummary("video" if video else "audio", summary, thumbnails=frames)


def _strip(decoder: Any, duration: float) -> tuple[str, ...]:
    starts = np.linspace(0.0, duration * 0.95, MAX_FRAMES)
    try:
        clips, _ = decoder.get_video_clips([(float(t), float(t)) for t in starts])
    except Exception:  # the summary line already says what the container holds
        return ()
    return tuple(image_data_uri(clip[0]) for clip in clips if len(clip))


def _seconds(value: float | None) -> str:
    return "? s" if value is None else f"{value:.2f} s"


def _number(value: float | None) -> str:
    return "?" if value is None else f"{value:.4g}"
