"""Video clips: map ranges to frames, seek to the keyframe before each clip, decode only it.

Frame ``k`` is the k-th frame in presentation order. A range in seconds ``(start, end)`` holds
the frame shown at ``start`` through the frame shown at ``end`` (both inclusive), so every range
holds at least one frame; a range in frames ``(a, b)`` holds frames ``a`` to ``b`` inclusive.
As in Energon, a range that ends past the last frame stops there, and a range that starts past
it holds nothing and is left out of the returned clips (check the timestamps returned with them).
Clips that follow each other inside one group of pictures are decoded without seeking again.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from stoker.errors import SampleError
from stoker.media.container import closing_iterator
from stoker.media.limits import AVLimits
from stoker.media.probe import StreamIndex

if TYPE_CHECKING:
    from av.container import InputContainer

VideoUnit = Literal["frames", "seconds"]


@dataclass(frozen=True)
class FrameSpan:
    """Frames ``first`` to ``last`` (inclusive, presentation order) of one clip."""

    first: int
    last: int


def frame_spans(
    index: StreamIndex, ranges: Sequence[tuple[float, float]], unit: VideoUnit
) -> list[FrameSpan]:
    """The frames each range holds; a range starting past the end has none and is left out."""
    if unit not in ("frames", "seconds"):
        raise SampleError(f"unknown video_unit={unit!r}.", hint="Use 'seconds' or 'frames'.")
    spans = []
    for start, end in ranges:
        if unit == "frames":
            first, last = max(int(start), 0), min(_frame_end(end), len(index) - 1)
            past = start >= len(index)
        else:
            first, last = max(index.at_or_before(start), 0), index.at_or_before(end)
            past = start >= float(index.end_pts * index.time_base)
        if past:  # no frame: the clip is left out of the result, as in Energon
            continue
        spans.append(FrameSpan(first, max(first, last)))
    return spans


def decode_spans(
    container: InputContainer,
    index: StreamIndex,
    spans: Sequence[FrameSpan],
    size: tuple[int, int] | None,
    limits: AVLimits,
) -> list[npt.NDArray[np.uint8]]:
    """One ``(T, H, W, 3)`` uint8 array per span, decoded from ``container``'s first video."""
    stream = container.streams.video[0]
    width, height = size or (stream.codec_context.width, stream.codec_context.height)
    for span in spans:
        frames = span.last - span.first + 1
        seconds = float((index.pts[span.last] - index.pts[span.first]) * index.time_base)
        limits.check_clip(frames, seconds, width, height)
    limits.check_bytes(sum((s.last - s.first + 1) * width * height * 3 for s in spans))
    cursor = _Cursor(container, stream, index, limits)
    try:
        return [cursor.read(span, width, height, size is not None) for span in spans]
    finally:
        cursor.close()


class _Cursor:
    """Decoded frames of one stream in presentation order, seeking only when it must."""

    def __init__(
        self, container: InputContainer, stream: Any, index: StreamIndex, limits: AVLimits
    ) -> None:
        self._container = container
        self._limits = limits
        self._decoded_count = 0
        self._stream = stream
        self._index = index
        self._frames: Generator[Any, None, None] | None = None
        self._last_pts: int | None = None  # the last frame taken from _frames

    def read(self, span: FrameSpan, width: int, height: int, resize: bool) -> Any:
        out = np.empty((span.last - span.first + 1, height, width, 3), dtype=np.uint8)
        first, last = int(self._index.pts[span.first]), int(self._index.pts[span.last])
        filled = 0
        for frame in self._frames_from(first, span.first):
            if frame.pts > last:
                break
            if frame.pts >= first and filled < len(out):
                kwargs = {"width": width, "height": height} if resize else {}
                out[filled] = frame.to_ndarray(format="rgb24", interpolation="BILINEAR", **kwargs)
                filled += 1
            if frame.pts == last:
                break
        if filled == 0:
            raise SampleError(
                f"no frame decoded for frames {span.first}..{span.last}.",
                hint="The file is corrupt or truncated; fix or drop it.",
            )
        return out[:filled]

    def close(self) -> None:
        """Stop decoding now, while the container is open.

        A suspended decoding generator must not be left to the garbage collector: it could be
        finalised after the container closed, or in a forked worker, and crash there.
        """
        if self._frames is not None:
            self._frames.close()
            self._frames = None

    def _frames_from(self, pts: int, frame: int) -> Iterator[Any]:
        keyframe = self._index.keyframe_before(frame)
        reusable = self._last_pts is not None and keyframe <= self._last_pts < pts
        if not reusable or self._frames is None:
            self.close()
            self._frames = self._seek(keyframe, pts)
        for decoded in self._frames:
            self._last_pts = decoded.pts
            yield decoded

    def _seek(self, keyframe: int, target: int) -> Generator[Any, None, None]:
        self._container.seek(keyframe, stream=self._stream, backward=True, any_frame=False)
        frames = self._decoded()
        head = next(frames, None)
        if head is not None and head.pts > target:  # the seek overshot: start from the top
            frames.close()
            self._container.seek(int(self._index.pts[0]), stream=self._stream, backward=True)
            frames = self._decoded()
            head = next(frames, None)
        with contextlib.closing(frames):
            if head is not None:
                yield head
            yield from frames

    def _decoded(self) -> Generator[Any, None, None]:
        with closing_iterator(self._container.decode(self._stream)) as frames:
            for frame in frames:
                self._decoded_count += 1
                self._limits.check_decoded(self._decoded_count)
                if frame.pts is None:
                    raise SampleError(
                        "a video frame has no presentation timestamp.",
                        hint="Remux the file (ffmpeg -i in -c copy out.mp4) so frames carry "
                        "timestamps.",
                    )
                yield frame


def _frame_end(end: float) -> int:
    return 2**62 if math.isinf(end) else int(end)
