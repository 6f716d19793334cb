"""Decode chosen frames of a video stream, and as little else as the codec allows.

The frames wanted (by presentation timestamp) are grouped by the keyframe before each; per
group the reader seeks to that keyframe once and feeds packets to the decoder in decode order:

* a wanted frame's packet is decoded in full;
* any other packet is decoded with ``skip_frame="NONREF"`` where that is exact
  (:class:`~stoker.media.nonref.NonRefPolicy`: H.264; HEVC in its highest temporal sub-layer):
  a frame no other frame refers to is not decoded at all, and frames that later frames refer
  to are decoded exactly as usual, so wanted frames come out bit-identical to a plain decode of
  every frame;
* once every wanted packet of the group is fed, the decoder is drained: nothing after the last
  wanted frame is read or decoded.

Example:
    >>> from stoker.media.container import open_container
    >>> from stoker.media.probe import index_streams
    >>> with open_container(mp4_bytes) as container:
    ...     video, _ = index_streams(container)
    ...     wanted = [int(video.pts[k]) for k in (0, 1, 60)]
    ...     for pts, frame in read_frames(container, video, wanted, AVLimits()):
    ...         print(pts, frame.width)
    0 64
    512 64
    30720 64
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator, Sequence
from itertools import groupby
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import SampleError
from stoker.media.limits import AVLimits
from stoker.media.nonref import NonRefPolicy
from stoker.media.probe import StreamIndex

if TYPE_CHECKING:
    from av.container import InputContainer

#: A seek target (microseconds, no stream) before the first packet of any file.
_BEFORE_ALL = -(2**62)


def read_frames(
    container: InputContainer, index: StreamIndex, wanted: Sequence[int], limits: AVLimits
) -> Generator[tuple[int, Any], None, None]:
    """``(pts, frame)`` for each pts in ``wanted`` (sorted, unique, all in ``index``).

    A frame the file does not decode (corrupt data) is missing from the output; the caller
    decides what that means. The codec context is left at ``skip_frame="DEFAULT"``.
    """
    stream = container.streams.video[0]
    reader = _GroupReader(container, stream, index, limits)
    try:
        for keyframe, group in groupby(wanted, key=lambda pts: _keyframe_of(index, pts)):
            yield from reader.read(keyframe, set(group))
    finally:
        stream.codec_context.skip_frame = "DEFAULT"


def _keyframe_of(index: StreamIndex, pts: int) -> int:
    return index.keyframe_before(int(np.searchsorted(index.pts, pts)))


class _GroupReader:
    """Seek to a keyframe, feed packets up to the last wanted one, drain; count the cost."""

    def __init__(
        self, container: InputContainer, stream: Any, index: StreamIndex, limits: AVLimits
    ) -> None:
        self._container = container
        self._stream = stream
        self._codec = stream.codec_context
        self._nonref = NonRefPolicy(self._codec.name, self._codec.extradata)
        self._index = index
        self._limits = limits
        self._fed = 0
        self._skip: str | None = None

    def read(self, keyframe: int, wanted: set[int]) -> Iterator[tuple[int, Any]]:
        """The frames of ``wanted`` (pts), decoded from the keyframe at ``keyframe`` on."""
        pending, unfed = set(wanted), set(wanted)
        with contextlib.closing(self._packets_from(keyframe, min(wanted))) as packets:
            for packet in packets:
                if packet.size == 0:  # the end of the stream: only draining is left
                    break
                self._fed += 1
                self._limits.check_decoded(self._fed)
                self._set_skip(packet.pts is None or packet.pts in unfed, packet)
                yield from _taken(self._codec.decode(packet), pending)
                unfed.discard(packet.pts)
                if not unfed:
                    break
        yield from _taken(self._codec.decode(None), pending)  # drain what is held back

    def _set_skip(self, wanted: bool, packet: Any) -> None:
        skip = "DEFAULT" if wanted or not self._nonref.may_skip(packet) else "NONREF"
        if skip != self._skip:
            self._codec.skip_frame = self._skip = skip

    def _packets_from(self, keyframe: int, first: int) -> Generator[Any, None, None]:
        """Packets in decode order from the keyframe at ``keyframe`` (or before it) on."""
        packets = self._seek(keyframe)
        head = next(packets, None)
        if head is not None and head.size and not _starts_before(head, first):
            # The seek missed the keyframe (MPEG-TS seeks by byte position and may land after
            # it): demux from the file's first packet to the keyframe, decoding nothing on the way.
            packets.close()
            packets = self._seek(None)
            head = next((p for p in packets if p.pts == keyframe or not p.size), None)
        try:
            if head is not None:
                yield head
            yield from packets
        finally:
            packets.close()

    def _seek(self, pts: int | None) -> Generator[Any, None, None]:
        """Packets from the keyframe at or before ``pts``, or from the file's start (None)."""
        if pts is None:  # before any timestamp: every container goes to its first packet
            self._container.seek(_BEFORE_ALL, backward=True, any_frame=False)
        else:
            self._container.seek(pts, stream=self._stream, backward=True, any_frame=False)
        self._skip = None  # a seek flushes the decoder; set skip_frame again before feeding
        packets: Any = self._container.demux(self._stream)  # a generator: it has close()
        return packets  # type: ignore[no-any-return]


def _starts_before(packet: Any, first: int) -> bool:
    """Whether decoding can start at ``packet`` to reach the frame at ``first``."""
    return bool(packet.is_keyframe) and packet.pts is not None and packet.pts <= first


def _taken(frames: list[Any], pending: set[int]) -> Iterator[tuple[int, Any]]:
    for frame in frames:
        if frame.pts is None:
            raise SampleError(
                "a video frame has no presentation timestamp.",
                hint="Remux the file (ffmpeg -i in -c copy out.mp4) so frames carry timestamps.",
            )
        if frame.pts in pending:
            pending.discard(frame.pts)
            yield int(frame.pts), frame
