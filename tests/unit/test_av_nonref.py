"""Frames nothing refers to are skipped only where that is exact (stoker.media.nonref).

HEVC's "sub-layer non-reference" pictures may be referred to by higher temporal sub-layers, so
with several sub-layers only those in the highest one are skipped; the videos are real x265 and
x264 encodes, and the frames stoker returns are compared with a plain decode of every frame.
"""

from __future__ import annotations

import functools
import io
from typing import Any

import av
import numpy as np
import pytest
import torch

import tests.integration._media as media
from stoker.media.av_decoder import AVDecoder
from stoker.media.nonref import NonRefPolicy

#: x265 with three temporal sub-layers (TSA_N and TSA_R pictures in sub-layers 1 and 2)
LAYERED = "keyint=12:bframes=3:b-pyramid=1:temporal-layers=3:log-level=error"


@functools.cache
def layered_hevc() -> bytes:
    saved = media.TEXTURED_CODECS["hevc"]
    media.TEXTURED_CODECS["hevc"] = ("libx265", {"x265-params": LAYERED})
    try:
        return media.make_textured_video("hevc")
    finally:
        media.TEXTURED_CODECS["hevc"] = saved


def packets(data: bytes) -> tuple[Any, list[tuple[bytes, list[tuple[int, int]]]]]:
    """The stream's policy, and each packet with its slices' (NAL type, TemporalId)."""
    with av.open(io.BytesIO(data)) as container:
        codec = container.streams.video[0].codec_context
        policy = NonRefPolicy(codec.name, codec.extradata)
        found = []
        for packet in container.demux(video=0):
            if packet.size:
                raw = bytes(packet)
                found.append((raw, _slices(raw)))
    return policy, found


def _slices(raw: bytes) -> list[tuple[int, int]]:
    pos, out = 0, []
    while pos < len(raw):
        size = int.from_bytes(raw[pos : pos + 4], "big")
        kind, tid = (raw[pos + 4] >> 1) & 0x3F, (raw[pos + 5] & 7) - 1
        if kind < 32:
            out.append((kind, tid))
        pos += 4 + size
    return out


def test_layered_hevc_skips_only_the_highest_sub_layer() -> None:
    policy, found = packets(layered_hevc())
    assert policy.enabled
    verdicts = {}
    for raw, slices in found:
        top = all(tid == 2 for kind, tid in slices if kind < 16 and kind % 2 == 0)
        assert policy.may_skip(raw) == top, slices
        verdicts.update(dict.fromkeys(slices, top))
    # x265 writes TSA_N pictures in sub-layers 1 and 2: only those in 2 are skipped; pictures of
    # sub-layer 2 may refer to the ones in 1.
    assert verdicts[(2, 2)] and not verdicts[(2, 1)] and verdicts[(3, 1)]
    raw = next(raw for raw, slices in found if slices == [(2, 2)])
    assert not policy.may_skip(raw[:-1])  # truncated: does not parse, decoded in full


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_single_layer_streams_skip_every_nonref_packet(codec: str) -> None:
    policy, found = packets(media.make_textured_video(codec))
    assert policy.enabled and all(policy.may_skip(raw) for raw, _ in found)


def test_hevc_without_hvcc_skips_nothing() -> None:
    """Annex B parameter sets (MPEG-TS) do not say how many sub-layers there are."""
    data = media.make_textured_video("hevc", fmt="mpegts")
    with av.open(io.BytesIO(data)) as container:
        codec = container.streams.video[0].codec_context
        assert codec.extradata is None or codec.extradata[0] != 1
        policy = NonRefPolicy(codec.name, codec.extradata)
    assert not policy.enabled and not policy.may_skip(b"\x00\x00\x00\x01\x00")
    assert not NonRefPolicy("vp9", None).enabled


def test_layered_hevc_frames_equal_a_full_decode() -> None:
    data = layered_hevc()
    ref = np.stack(media.decode_every_frame(data))
    picked = [1, 2, 3, 11, 13, 14, 22, 30, 47]
    clips, _ = AVDecoder(data).get_video_clips([(k, k) for k in picked], "frames")
    expected = torch.from_numpy(np.ascontiguousarray(ref[picked].transpose(0, 3, 1, 2)))
    assert torch.equal(torch.cat(clips), expected)
