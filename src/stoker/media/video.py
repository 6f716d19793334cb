"""Video clips: map ranges to frames, then decode only those frames (:mod:`.video_reader`).

Frame ``k`` is the k-th frame in presentation order. A range in seconds ``(start, end)`` holds
the frame shown at ``start`` through the frame shown at ``end`` (both inclusive), so every range
holds at least one frame; a range in frames ``(a, b)`` holds frames ``a`` to ``b`` inclusive.
As in Energon, a range that ends past the last frame stops there, and a range that starts past
it holds nothing and is left out of the returned clips (check the timestamps returned with them).
Frames of several clips inside one group of pictures are decoded in one pass, and a frame two
clips hold is decoded and converted once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from stoker.errors import SampleError
from stoker.media.container import import_av
from stoker.media.limits import AVLimits
from stoker.media.probe import StreamIndex
from stoker.media.video_reader import read_frames

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
    """One ``(T, H, W, 3)`` uint8 array per span, decoded from ``container``'s first video.

    Every frame is decoded at most once, and converted to RGB (resized with swscale's bilinear
    filter when ``size`` is given) once, however many spans hold it. A frame the file fails
    to decode is left out of its clip; a clip with no frame at all is an error.
    """
    stream = container.streams.video[0]
    width, height = size or (stream.codec_context.width, stream.codec_context.height)
    for span in spans:
        seconds = float((index.pts[span.last] - index.pts[span.first]) * index.time_base)
        limits.check_clip(span.last - span.first + 1, seconds, width, height)
    limits.check_bytes(sum((s.last - s.first + 1) * width * height * 3 for s in spans))
    outs = [np.empty((s.last - s.first + 1, height, width, 3), np.uint8) for s in spans]
    filled = [np.zeros(len(out), np.bool_) for out in outs]
    rows = _rows_by_pts(index, spans)
    resize = {"width": width, "height": height} if size is not None else {}
    # One reformatter for all frames: it keeps its swscale context (frame.to_ndarray would
    # set up a new one per frame, ~40 % of a 224 px conversion).
    reformatter = import_av().video.reformatter.VideoReformatter()
    with contextlib.closing(read_frames(container, index, sorted(rows), limits)) as frames:
        for pts, frame in frames:
            rgb = reformatter.reformat(
                frame, format="rgb24", interpolation="BILINEAR", **resize
            ).to_ndarray()
            for clip, row in rows[pts]:
                outs[clip][row] = rgb
                filled[clip][row] = True
    for span, done in zip(spans, filled, strict=True):
        if not done.any():
            raise SampleError(
                f"no frame decoded for frames {span.first}..{span.last}.",
                hint="The file is corrupt or truncated; fix or drop it.",
            )
    return [out if done.all() else out[done] for out, done in zip(outs, filled, strict=True)]


def _rows_by_pts(
    index: StreamIndex, spans: Sequence[FrameSpan]
) -> dict[int, list[tuple[int, int]]]:
    """For each frame any span holds (by pts): the ``(span, row)`` places it goes to."""
    rows: dict[int, list[tuple[int, int]]] = {}
    for clip, span in enumerate(spans):
        for row, pts in enumerate(index.pts[span.first : span.last + 1].tolist()):
            rows.setdefault(int(pts), []).append((clip, row))
    return rows


def _frame_end(end: float) -> int:
    return 2**62 if math.isinf(end) else int(end)
