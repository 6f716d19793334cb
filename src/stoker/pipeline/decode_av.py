"""The part decoder for video and audio parts, by the ``av_decode`` mode of the SampleDecoder.

``"AVDecoder"`` (default) gives a lazy :class:`AVDecoder`; ``"pyav"`` an open PyAV input
container (use it inside the worker: it does not pickle); ``"torch"`` an :class:`AVData` with
everything decoded (the video with its audio when ``video_decode_audio``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stoker.media.av_decoder import AVDecoder
from stoker.media.container import open_input

if TYPE_CHECKING:
    from stoker.pipeline.decode import SampleDecoder


def decode_av(ext: str, data: bytes, decoder: SampleDecoder) -> Any:
    """Decode the media part ``data`` (extension ``ext``) as ``decoder.av_decode`` says."""
    if decoder.av_decode == "pyav":
        return open_input(data)
    av_decoder = AVDecoder(data, device=getattr(decoder, "video_decode_device", None))
    if decoder.av_decode == "torch":
        return av_decoder.get_frames(video_decode_audio=decoder.video_decode_audio)
    return av_decoder
