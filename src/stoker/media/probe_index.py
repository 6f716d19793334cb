"""``AVProbeIndex``: the packets of one video stream in storage order, with keyframe flags.

Energon's ``megatron.energon.av.av_reader.AVProbeIndex`` (served under the alias): built by
demuxing a container once, for seeking in containers whose index FFmpeg does not fill in on open
(AVI). stoker's own decoders seek with :class:`stoker.media.probe.StreamIndex`; this class gives
code written against Energon the same entries and search.

Example:
    >>> entry = AVProbeIndexEntry(timestamp=512, is_keyframe=True)
    >>> entry.timestamp, entry.is_keyframe
    (512, True)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AVProbeIndexEntry:
    """One packet: its presentation timestamp (in the stream's time base) and keyframe flag."""

    timestamp: int
    is_keyframe: bool


class AVProbeIndex:
    """The packets with a timestamp of video stream ``stream_idx`` of ``container`` (PyAV), in
    the order the container stores them; the container is sought back to its start."""

    def __init__(self, container: Any, stream_idx: int = 0) -> None:
        self._entries = [
            AVProbeIndexEntry(int(packet.pts), bool(packet.is_keyframe))
            for packet in container.demux(video=stream_idx)
            if packet.pts is not None
        ]
        self._keyframes = [e.timestamp for e in self._entries if e.is_keyframe]
        container.seek(0)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, idx: int) -> AVProbeIndexEntry:
        return self._entries[idx]

    def __iter__(self) -> Iterator[AVProbeIndexEntry]:
        return iter(self._entries)

    def search_timestamp(
        self, timestamp: int, *, backward: bool = True, any_frame: bool = False
    ) -> int:
        """The index of the keyframe (or, with ``any_frame``, the packet) at or before
        ``timestamp`` (``backward``; the first one where none is) or at or after it (else);
        -1 where there is none."""
        times = sorted(e.timestamp for e in self._entries) if any_frame else self._keyframes
        if not times:
            return -1
        if backward:
            found = times[max(bisect.bisect_right(times, timestamp) - 1, 0)]
        else:
            pos = bisect.bisect_left(times, timestamp)
            if pos == len(times):
                return -1
            found = times[pos]
        for i, entry in enumerate(self._entries):
            if entry.timestamp == found and (any_frame or entry.is_keyframe):
                return i
        return -1
