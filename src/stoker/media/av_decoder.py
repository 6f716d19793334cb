"""``AVDecoder``: a media file's bytes, decoded on request into the clips a task needs.

The decoder holds the encoded bytes only (it pickles, so it crosses worker processes), and
decodes when asked: the first call indexes the packets (one demuxing pass, nothing decoded),
later calls seek to the keyframe before each clip and decode only what the clip needs. Every
call opens its own container with codec threads off (fork-safe) and closes it before
returning. Failures are :class:`~stoker.errors.SampleError`, which the loader's
error policy skips and reports.

Example:
    >>> import io
    >>> decoder = AVDecoder(io.BytesIO(mp4_bytes))
    >>> clip = decoder.get_clips(video_clip_ranges=[(0.5, 1.0)]).video_clips[0]
    >>> clip.shape  # 16 frames of a 30 fps video
    torch.Size([16, 3, 48, 64])
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, BinaryIO, TypeVar

from stoker.errors import SampleError
from stoker.media.audio import AudioUnit
from stoker.media.av_data import AVData
from stoker.media.clips import Clips, Ranges, audio_clips, video_clips
from stoker.media.container import open_container
from stoker.media.gpu_video import GpuVideo
from stoker.media.limits import AVLimits
from stoker.media.metadata import AVMetadata
from stoker.media.probe import StreamIndex, av_metadata, count_audio_samples, index_streams
from stoker.media.video import VideoUnit

if TYPE_CHECKING:
    from av.container import InputContainer

T = TypeVar("T")
WHOLE: Ranges = [(0.0, float("inf"))]
_VIDEO_FIELDS = tuple(f.name for f in dataclasses.fields(AVMetadata) if f.name.startswith("video_"))
_AUDIO_FIELDS = tuple(f.name for f in dataclasses.fields(AVMetadata) if f.name.startswith("audio_"))


class AVDecoder:
    """Lazy decoder of one video or audio file, with Energon's methods.

    Args:
        stream: The encoded file (a binary stream, or bytes).
        suppress_warnings: Accepted for Energon compatibility; stoker maps seconds to frames
            exactly and has nothing to warn about.
        limits: Bounds on what one call may decode (see :class:`AVLimits`).
        threads: Codec threads per call; 0 keeps decoding in the calling thread (fork-safe).
        device: Decode video clips on this CUDA device (NVDEC; :mod:`stoker.media.gpu_video`),
            giving CUDA tensors; None (default) decodes on the CPU.
    """

    def __init__(
        self,
        stream: BinaryIO | bytes,
        suppress_warnings: bool = False,
        *,
        limits: AVLimits | None = None,
        threads: int = 0,
        device: int | None = None,
    ) -> None:
        self.stream: BinaryIO = io.BytesIO(stream) if isinstance(stream, bytes) else stream
        self.suppress_warnings = suppress_warnings
        self.limits = limits or AVLimits()
        self.threads = threads
        self.device = device
        self._index: tuple[StreamIndex | None, StreamIndex | None] | None = None
        self._metadata: AVMetadata | None = None
        #: (samples, seconds) decoded and counted, on request
        self._audio_samples: tuple[int, float | None] | None = None
        self._held: InputContainer | None = None  # open inside keep_open() only

    def get_video(self) -> AVData:
        """The whole video as one clip (no audio)."""
        clips, times = self.get_video_clips(WHOLE)
        return AVData(
            video_clips=clips, video_timestamps=times, audio_clips=[], audio_timestamps=[]
        )

    def get_audio(self) -> AVData:
        """The whole audio track as one clip."""
        clips, times = self.get_audio_clips(WHOLE)
        return AVData(
            video_clips=[], video_timestamps=[], audio_clips=clips, audio_timestamps=times
        )

    def get_video_with_audio(self) -> AVData:
        """The whole video and the whole audio track."""
        return self.get_clips(video_clip_ranges=WHOLE, audio_clip_ranges=WHOLE)

    def get_frames(self, video_decode_audio: bool = False) -> AVData:
        """Everything decoded: the video (with audio if ``video_decode_audio``), or the audio."""
        if self.has_video_stream():
            return self.get_video_with_audio() if video_decode_audio else self.get_video()
        return self.get_audio()

    def get_clips(
        self,
        video_clip_ranges: Ranges | None = None,
        audio_clip_ranges: Ranges | None = None,
        video_unit: VideoUnit = "seconds",
        audio_unit: AudioUnit = "seconds",
        video_out_frame_size: tuple[int, int] | None = None,
    ) -> AVData:
        """Video and/or audio clips by ``(start, end)`` ranges, in one pass over the container.

        Video ranges have an inclusive end and hold at least one frame (see
        :mod:`stoker.media.video`); ``video_out_frame_size`` is ``(width, height)``.
        """
        video: Clips = ([], [])
        audio: Clips = ([], [])
        with self._open() as (container, vindex, aindex):
            on_gpu, device = None, getattr(self, "device", None)  # (pickles of older versions)
            if video_clip_ranges is not None and device is not None:
                on_gpu = GpuVideo(device).clips(
                    self._data(),
                    container,
                    vindex,
                    video_clip_ranges,
                    video_unit,
                    video_out_frame_size,
                    self.limits,
                )
            if on_gpu is not None:
                video = on_gpu
            elif video_clip_ranges is not None:
                video = video_clips(
                    container,
                    vindex,
                    video_clip_ranges,
                    video_unit,
                    video_out_frame_size,
                    self.limits,
                )
            if audio_clip_ranges is not None:
                audio = audio_clips(container, aindex, audio_clip_ranges, audio_unit, self.limits)
        return AVData(
            video_clips=video[0],
            video_timestamps=video[1],
            audio_clips=audio[0],
            audio_timestamps=audio[1],
        )

    def get_video_clips(
        self,
        video_clip_ranges: Ranges,
        video_unit: VideoUnit = "seconds",
        video_out_frame_size: tuple[int, int] | None = None,
    ) -> Clips:
        """``(clips, (start, end) seconds of each)`` for video ranges (see :meth:`get_clips`)."""
        data = self.get_clips(video_clip_ranges, None, video_unit, "seconds", video_out_frame_size)
        return data.video_clips or [], data.video_timestamps or []

    def get_audio_clips(
        self, audio_clip_ranges: Ranges, audio_unit: AudioUnit = "seconds"
    ) -> Clips:
        """``(clips, (start, end) seconds of each)`` for audio ranges (end exclusive)."""
        data = self.get_clips(None, audio_clip_ranges, audio_unit=audio_unit)
        return data.audio_clips or [], data.audio_timestamps or []

    def get_metadata(
        self,
        get_video: bool = True,
        get_video_duration: bool = True,
        get_video_frame_count: bool = True,
        get_video_frame_size: bool = True,
        get_audio: bool = True,
        get_audio_duration: bool = True,
        get_audio_num_samples: bool = False,
    ) -> AVMetadata:
        """Frame count, fps, duration and size of the video; rate, channels, duration of audio.

        They come from one demuxing pass (cached), so the ``get_video_*``/``get_audio_duration``
        flags cost nothing and are accepted for Energon compatibility. ``get_video=False`` or
        ``get_audio=False`` leaves those fields None, as in Energon. ``audio_num_samples`` is
        estimated from packet durations unless ``get_audio_num_samples`` is set: then the audio
        is decoded once and its samples counted, exactly as Energon counts them.
        """
        if self._metadata is None:
            with self._open():
                pass
        assert self._metadata is not None
        meta = dataclasses.replace(self._metadata)
        if get_audio_num_samples and meta.audio_sample_rate is not None:
            meta.audio_num_samples, seconds = self._exact_audio_samples()
            meta.audio_duration = meta.audio_duration if seconds is None else seconds
        if not get_video:
            meta = dataclasses.replace(meta, **dict.fromkeys(_VIDEO_FIELDS))
        if not get_audio:
            meta = dataclasses.replace(meta, **dict.fromkeys(_AUDIO_FIELDS))
        return meta

    def _exact_audio_samples(self) -> tuple[int, float | None]:
        if self._audio_samples is None:
            with self._open() as (container, _, _):
                self._audio_samples = count_audio_samples(container)
        return self._audio_samples

    def get_video_fps(self) -> float:
        """Frames per second of the video (its average rate)."""
        return _known(self.get_metadata().video_fps, "video fps")

    def get_audio_samples_per_second(self) -> int:
        """The audio sample rate."""
        return _known(self.get_metadata().audio_sample_rate, "audio sample rate")

    def has_video_stream(self) -> bool:
        """Whether the file has a video stream with frames."""
        return self.get_metadata().video_num_frames is not None

    def has_audio_stream(self) -> bool:
        """Whether the file has an audio stream."""
        return self.get_metadata().audio_sample_rate is not None

    def get_audio_duration(self) -> float | None:
        """Seconds of audio (None without an audio stream)."""
        return self.get_metadata().audio_duration

    def get_video_duration(self, get_frame_count: bool = False) -> tuple[float | None, int | None]:
        """``(seconds, frame count)``; the count is free here, so it is always given."""
        meta = self.get_metadata()
        return meta.video_duration, meta.video_num_frames

    @contextmanager
    def keep_open(self) -> Iterator[AVDecoder]:
        """Serve every call inside the block from one open container (saves re-opening).

        Example:
            >>> import io
            >>> decoder = AVDecoder(io.BytesIO(mp4_bytes))
            >>> with decoder.keep_open():
            ...     fps = decoder.get_video_fps()
            ...     clips, _ = decoder.get_video_clips([(0, 7 / fps)])  # frames 0 to 7
            >>> fps, clips[0].shape
            (30.0, torch.Size([8, 3, 48, 64]))
        """
        with self._open() as (container, _, _):
            self._held = container
            try:
                yield self
            finally:
                self._held = None

    @contextmanager
    def _open(self) -> Iterator[tuple[InputContainer, StreamIndex | None, StreamIndex | None]]:
        if self._held is not None and self._index is not None:
            yield self._held, *self._index
            return
        with open_container(self.stream, self.threads, probe_decode=False) as container:
            if self._index is None:
                self._index = index_streams(container)
                self._metadata = av_metadata(container, *self._index)
            yield container, *self._index

    def _data(self) -> bytes:
        """The encoded file's bytes."""
        if isinstance(self.stream, io.BytesIO):
            return self.stream.getvalue()
        position = self.stream.tell()
        self.stream.seek(0)
        try:
            return self.stream.read()
        finally:
            self.stream.seek(position)

    def __getstate__(self) -> dict[str, object]:
        return {**vars(self), "_held": None}  # an open container stays in its process

    def __repr__(self) -> str:
        return f"AVDecoder(stream={self.stream!r})"


def _known(value: T | None, what: str) -> T:
    if value is None:
        raise SampleError(f"the media has no {what}.", hint="Check has_video_stream() first.")
    return value
