"""Bounds on what decoding one sample's media may cost, so one bad file cannot stall a worker.

Example:
    >>> AVLimits(max_clip_frames=64).max_clip_frames
    64
"""

from __future__ import annotations

from dataclasses import dataclass

from stoker.errors import SampleError


@dataclass(frozen=True)
class AVLimits:
    """Per-call bounds of :class:`~stoker.media.av_decoder.AVDecoder`.

    Args:
        max_clip_frames: Most frames one video clip may hold.
        max_clip_seconds: Longest clip (video or audio) in seconds.
        max_frame_pixels: Most pixels of one output frame (width x height).
        max_output_bytes: Most bytes of decoded tensors one call may return.
        max_decoded_frames: Most frames one call may decode, counting those decoded only to
            reach a clip (a file with rare keyframes costs this much at worst).

    A request over a limit is refused before decoding with a per-sample error, which the
    loader's error policy skips and reports.
    """

    max_clip_frames: int = 4096
    max_clip_seconds: float = 3600.0
    max_frame_pixels: int = 2**25
    max_output_bytes: int = 2**32
    max_decoded_frames: int = 36_000

    def check_clip(self, frames: int, seconds: float, width: int, height: int) -> None:
        """Raise a :class:`SampleError` if a video clip of this shape is over a limit."""
        if frames > self.max_clip_frames:
            raise _over(
                f"the clip has {frames} frames, over max_clip_frames={self.max_clip_frames}"
            )
        if seconds > self.max_clip_seconds:
            raise _over(
                f"the clip lasts {seconds:.3f} s, over max_clip_seconds={self.max_clip_seconds}"
            )
        if width * height > self.max_frame_pixels:
            raise _over(
                f"frames of {width}x{height} are over max_frame_pixels={self.max_frame_pixels}"
            )

    def check_seconds(self, seconds: float) -> None:
        """Raise a :class:`SampleError` if a clip of ``seconds`` is over the duration limit."""
        if seconds > self.max_clip_seconds:
            raise _over(
                f"the clip lasts {seconds:.3f} s, over max_clip_seconds={self.max_clip_seconds}"
            )

    def check_decoded(self, frames: int) -> None:
        """Raise a :class:`SampleError` once a call has decoded more frames than allowed."""
        if frames > self.max_decoded_frames:
            raise _over(
                f"decoding needs more than max_decoded_frames={self.max_decoded_frames} frames"
            )

    def check_bytes(self, nbytes: int) -> None:
        """Raise a :class:`SampleError` if the decoded output would exceed the byte limit."""
        if nbytes > self.max_output_bytes:
            raise _over(
                f"the decoded output needs {nbytes} bytes, "
                f"over max_output_bytes={self.max_output_bytes}"
            )


def _over(problem: str) -> SampleError:
    return SampleError(
        problem + ".",
        hint="Request shorter or smaller clips (video_out_frame_size=...), or pass an AVDecoder "
        "larger AVLimits(...) if the cost is intended.",
    )
