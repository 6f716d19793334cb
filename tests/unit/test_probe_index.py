"""``AVProbeIndex`` (Energon's ``megatron.energon.av.av_reader``): packets and keyframe search."""

from __future__ import annotations

import io

import av

from stoker.media.probe import index_streams
from stoker.media.probe_index import AVProbeIndex
from tests.integration._media import make_video


def test_entries_and_keyframe_search_match_the_stream_index() -> None:
    data = make_video("mp4", frames=90, audio=False)
    with av.open(io.BytesIO(data)) as container:
        index = AVProbeIndex(container, 0)
        assert next(container.demux(video=0)).pts is not None  # sought back to the start
    with av.open(io.BytesIO(data)) as container:
        video, _ = index_streams(container)
    assert video is not None and len(index) == len(video) == 90
    keyframes = [(i, e.timestamp) for i, e in enumerate(index) if e.is_keyframe]
    assert [t for _, t in keyframes] == sorted(video.pts[video.keyframe].tolist())
    assert len(keyframes) >= 2 and keyframes[0][1] == 0
    for i, pts in keyframes:
        assert index.search_timestamp(pts) == i
        assert index[i].timestamp == pts and index[i].is_keyframe
    (_, first), (second_i, second) = keyframes[0], keyframes[1]
    assert index.search_timestamp((first + second) // 2) == keyframes[0][0]
    assert index.search_timestamp(first + 1, backward=False) == second_i
    assert index.search_timestamp(10**9, backward=False) == -1
