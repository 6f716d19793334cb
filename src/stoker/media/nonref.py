"""Which packets may be fed with ``skip_frame="NONREF"`` without changing any other frame.

FFmpeg's H.264 and HEVC decoders, under ``NONREF``, leave out the NAL units that say nothing
refers to them: H.264 slices with ``nal_ref_idc == 0``, and HEVC's "sub-layer non-reference"
types (``TRAIL_N``, ``TSA_N``, ``STSA_N``, ``RADL_N``, ``RASL_N``, reserved ``N10/12/14``).

For H.264 that is exact. For HEVC it is exact only in the stream's highest temporal sub-layer:
a sub-layer non-reference picture may still be referred to by pictures of *higher* sub-layers,
and FFmpeg does not look at the ``TemporalId``. So an HEVC packet is skippable only if each of
its non-reference NAL units is in the highest sub-layer, which the ``hvcC`` header gives
(``numTemporalLayers``); where it does not (Annex B extradata, "unknown"), nothing is skipped.

Example:
    >>> import av, io
    >>> with av.open(io.BytesIO(mp4_bytes)) as container:  # an H.264 video
    ...     stream = container.streams.video[0]
    ...     policy = NonRefPolicy(stream.codec_context.name, stream.codec_context.extradata)
    ...     skippable = [policy.may_skip(p) for p in container.demux(stream) if p.size]
    >>> len(skippable), all(skippable)  # FFmpeg's rule is exact for every H.264 packet
    (300, True)
    >>> NonRefPolicy("hevc", None).may_skip(b"")  # HEVC whose sub-layers are unknown: never
    False
"""

from __future__ import annotations

from typing import Any

#: HEVC NAL unit types below 16 that are even are sub-layer non-reference slices.
_HEVC_NONREF_END = 16


class NonRefPolicy:
    """Whether a packet of one stream may be decoded under ``skip_frame="NONREF"``.

    Args:
        codec: FFmpeg's decoder name (``codec_context.name``).
        extradata: The stream's codec extradata (``avcC``/``hvcC`` or Annex B), or None.
    """

    def __init__(self, codec: str, extradata: bytes | None) -> None:
        self._hevc_top: int | None = None  # the highest TemporalId, for HEVC in hvcC
        self._length_size = 4
        if codec == "h264":
            self.enabled = True
        elif codec == "hevc":
            layers, length_size = _hvcc_layers(extradata)
            self.enabled = layers > 0
            self._hevc_top, self._length_size = layers - 1, length_size
        else:
            self.enabled = False

    def may_skip(self, packet: Any) -> bool:
        """Whether skipping ``packet``'s non-reference NAL units changes no other frame."""
        if not self.enabled:
            return False
        if self._hevc_top is None or self._hevc_top == 0:
            return True  # H.264, or HEVC in one temporal sub-layer: FFmpeg's rule is exact
        return _hevc_nonref_in_top_layer(memoryview(packet), self._length_size, self._hevc_top)


def _hvcc_layers(extradata: bytes | None) -> tuple[int, int]:
    """``(numTemporalLayers, NAL length size)`` from an ``hvcC`` record; 0 layers if unknown."""
    if not extradata or len(extradata) < 23 or extradata[0] != 1:
        return 0, 4  # Annex B parameter sets, or none: the sub-layers are not known
    packed = extradata[21]
    return (packed >> 3) & 0b111, (packed & 0b11) + 1


def _hevc_nonref_in_top_layer(data: memoryview, length_size: int, top: int) -> bool:
    """Whether every non-reference slice NAL unit of a length-prefixed packet is at ``top``.

    A packet that does not parse as length-prefixed NAL units is not skippable.
    """
    pos, end = 0, data.nbytes
    while pos < end:
        if pos + length_size + 2 > end:
            return False
        size = int.from_bytes(data[pos : pos + length_size], "big")
        header = pos + length_size
        if size < 2 or header + size > end:
            return False
        kind, temporal_id = (data[header] >> 1) & 0x3F, (data[header + 1] & 0b111) - 1
        if kind < _HEVC_NONREF_END and kind % 2 == 0 and temporal_id != top:
            return False
        pos = header + size
    return True
