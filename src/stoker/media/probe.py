"""What a media file holds, from one demuxing pass (packets only, nothing decoded).

The :class:`StreamIndex` of a stream lists the presentation timestamp of every frame (video) or
packet (audio), sorted, and which are keyframes. It gives the true frame count, duration and
frame rate, maps seconds to frames, and tells where to seek before a clip. Timestamps are in the
container's timeline (``pts * time_base`` seconds), shared by the video and audio streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from stoker.errors import SampleError
from stoker.media.container import closing_iterator
from stoker.media.metadata import AVMetadata

if TYPE_CHECKING:
    from av.container import InputContainer

#: Tolerance when comparing a requested time with a frame's time (float rounding of seconds).
TIME_EPSILON = 1e-6


@dataclass(frozen=True)
class StreamIndex:
    """Sorted presentation timestamps of one stream's packets, with keyframe flags."""

    pts: npt.NDArray[np.int64]
    keyframe: npt.NDArray[np.bool_]
    durations: npt.NDArray[np.int64]
    time_base: Fraction

    def __len__(self) -> int:
        return len(self.pts)

    def seconds(self, i: int) -> float:
        """The presentation time of packet ``i`` in seconds."""
        return float(self.pts[i] * self.time_base)

    def end_seconds(self, i: int) -> float:
        """The time at which packet ``i`` ends, in seconds."""
        return float((int(self.pts[i]) + max(int(self.durations[i]), 0)) * self.time_base)

    @property
    def end_pts(self) -> int:
        """The timestamp just after the last packet."""
        return int(self.pts[-1] + max(int(self.durations[-1]), 0))

    @property
    def duration(self) -> float:
        """Seconds from the first packet's start to the last packet's end."""
        return float((self.end_pts - int(self.pts[0])) * self.time_base)

    def at_or_before(self, seconds: float) -> int:
        """The index of the last packet starting at or before ``seconds`` (-1 if none)."""
        ticks = (seconds + TIME_EPSILON) / self.time_base
        return int(np.searchsorted(self.pts, ticks, side="right")) - 1

    def keyframe_before(self, i: int) -> int:
        """The pts of the last keyframe at or before packet ``i`` (the first packet if none)."""
        keys = np.flatnonzero(self.keyframe[: i + 1])
        return int(self.pts[keys[-1]] if len(keys) else self.pts[0])


def index_streams(container: InputContainer) -> tuple[StreamIndex | None, StreamIndex | None]:
    """``(video index, audio index)`` of the first video and audio streams, in one pass."""
    wanted = [s for s in (_first(container, "video"), _first(container, "audio")) if s]
    rows: dict[int, list[tuple[int, bool, int]]] = {s.index: [] for s in wanted}
    for packet in container.demux(wanted):
        if packet.pts is not None and packet.size:
            rows[packet.stream.index].append((packet.pts, packet.is_keyframe, packet.duration or 0))
    indexes = [_to_index(rows[s.index], s.time_base) if s else None for s in _pair(container)]
    return indexes[0], indexes[1]


def av_metadata(
    container: InputContainer, video: StreamIndex | None, audio: StreamIndex | None
) -> AVMetadata:
    """The :class:`AVMetadata` of a container, given its indexes from :func:`index_streams`."""
    meta = AVMetadata()
    vstream, astream = _pair(container)
    if vstream is not None and video is not None:
        meta.video_num_frames = len(video)
        meta.video_duration = video.duration
        rate = vstream.average_rate
        meta.video_fps = float(rate) if rate else len(video) / max(video.duration, TIME_EPSILON)
        codec = vstream.codec_context  # None: FFmpeg cannot decode it
        meta.video_width = codec.width if codec else None
        meta.video_height = codec.height if codec else None
    if astream is not None and audio is not None:
        rate = int(astream.sample_rate)
        meta.audio_sample_rate = rate
        meta.audio_channels = int(astream.channels)
        meta.audio_duration = _energon_seconds(astream, audio.end_pts)
        meta.audio_num_samples = round(
            float(int(audio.durations.clip(min=0).sum()) * audio.time_base) * rate
        )
    return meta


def count_audio_samples(container: InputContainer) -> tuple[int, float | None]:
    """``(samples, seconds)`` of the first audio stream, by decoding it all, as Energon does.

    The sample count is exact where packet durations are not (encoder priming and padding,
    variable frame sizes); the duration is then, as in Energon, where the last frame ends.
    """
    stream = container.streams.audio[0]
    container.seek(0)
    total, end = 0, None
    with closing_iterator(container.decode(stream)) as decoded:
        for frame in decoded:
            total += int(frame.samples)
            if frame.pts is not None and frame.duration is not None:
                end = int(frame.pts) + int(frame.duration)
    return total, None if end is None else _energon_seconds_of_end(stream, end)


def _energon_seconds_of_end(stream: Any, end: int) -> float | None:
    if stream.time_base is None:
        return None
    return float((end - (stream.start_time or 0)) * stream.time_base)


def _energon_seconds(stream: Any, end: int | None) -> float | None:
    """A stream's duration as Energon computes it: the header's, else ``end`` (in ticks).

    Then less the stream's start time. For audio this differs from the packet span where the
    encoder's priming packets start before 0 (AAC, Opus).
    """
    ticks = stream.duration or end
    return None if ticks is None else _energon_seconds_of_end(stream, ticks)


def require_frames(index: StreamIndex | None, kind: str) -> StreamIndex:
    """``index``, or a :class:`SampleError` if the stream has no packets at all."""
    if index is None or len(index) == 0:
        raise SampleError(
            f"the {kind} stream holds no frames.",
            hint="The file is empty or truncated; fix or drop it.",
        )
    return index


def _first(container: InputContainer, kind: str) -> Any:
    streams = getattr(container.streams, kind)
    return streams[0] if streams else None


def _pair(container: InputContainer) -> tuple[Any, Any]:
    return _first(container, "video"), _first(container, "audio")


def _to_index(rows: list[tuple[int, bool, int]], time_base: Fraction | None) -> StreamIndex:
    rows.sort()
    pts = np.array([r[0] for r in rows], dtype=np.int64)
    durations = np.array([r[2] for r in rows], dtype=np.int64)
    if len(pts) > 1:  # packets without a duration: the distance to the next one
        gaps = np.diff(pts, append=pts[-1] + int(np.median(np.diff(pts))))
        durations = np.where(durations > 0, durations, gaps)
    return StreamIndex(
        pts=pts,
        keyframe=np.array([r[1] for r in rows], dtype=np.bool_),
        durations=durations,
        time_base=time_base or Fraction(1, 1),
    )
