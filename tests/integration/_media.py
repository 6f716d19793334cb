"""Small real media made with PyAV, whose contents a test can check exactly.

Frame ``k`` of a video is a flat colour, :func:`colour_of` ``(k)``, so the frame numbers a
clip holds are read back from pixel values (:func:`frame_numbers`), even after lossy colour
conversion and resizing (the colours of two frames differ by at least 12 levels). Audio is a
440 Hz sine of a known sample rate, so clip lengths can be checked to the sample.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch

#: (video codec, options, audio codec, audio rate) per container.
CODECS: dict[str, tuple[str, dict[str, str], str, int]] = {
    "mp4": ("libx264", {"qp": "0", "g": "12", "bf": "2"}, "aac", 16000),
    "mov": ("libx264", {"qp": "0", "g": "12"}, "aac", 16000),
    "mkv": ("libx264", {"qp": "0", "g": "12"}, "flac", 16000),
    "webm": ("libvpx-vp9", {"lossless": "1", "g": "12"}, "libopus", 48000),
    "avi": ("ffv1", {"g": "12"}, "pcm_s16le", 16000),
}
FORMATS = {"mp4": "mp4", "mov": "mov", "mkv": "matroska", "webm": "webm", "avi": "avi"}
AUDIO_FORMATS = {
    "wav": ("wav", "pcm_s16le"),
    "flac": ("flac", "flac"),
    "mp3": ("mp3", "libmp3lame"),
    "ogg": ("ogg", "libopus"),
    "m4a": ("ipod", "aac"),
    "aac": ("adts", "aac"),
}


def colour_of(k: int) -> tuple[int, int, int]:
    """The RGB colour of frame ``k``: red counts k mod 16, green k // 16 (up to frame 95)."""
    return 20 + 12 * (k % 16), 20 + 40 * (k // 16 % 6), 128


def frame_numbers(clip: torch.Tensor) -> list[int]:
    """The frame numbers of a ``(T, 3, H, W)`` clip of a video made by :func:`make_video`."""
    means = clip.float().mean(dim=(2, 3)).tolist()
    return [round((r - 20) / 12) + 16 * round((g - 20) / 40) for r, g, _ in means]


def make_video(
    ext: str = "mp4",
    *,
    fps: int = 30,
    frames: int = 60,
    size: tuple[int, int] = (64, 48),
    audio: bool = True,
) -> bytes:
    """A ``frames``-frame video (with a sine audio track if ``audio``) in container ``ext``."""
    codec, options, audio_codec, rate = CODECS[ext]
    buf = io.BytesIO()
    with av.open(buf, "w", format=FORMATS[ext]) as out:
        video = out.add_stream(codec, rate=fps, options=options)
        video.width, video.height, video.pix_fmt = size[0], size[1], "yuv420p"
        sound = out.add_stream(audio_codec, rate=rate, layout="mono") if audio else None
        for k in range(frames):
            flat = np.full((size[1], size[0], 3), colour_of(k), np.uint8)
            frame = av.VideoFrame.from_ndarray(flat, format="rgb24")
            frame.pts = k
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        if sound is not None:
            _write_sine(out, sound, rate, round(frames / fps * rate))
    return buf.getvalue()


def make_audio(ext: str = "wav", *, rate: int = 16000, seconds: float = 2.0) -> bytes:
    """``seconds`` of a mono 440 Hz sine at ``rate`` in format ``ext``."""
    fmt, codec = AUDIO_FORMATS[ext]
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=rate, layout="mono")
        _write_sine(out, stream, rate, round(seconds * rate))
    return buf.getvalue()


def sine(samples: int, rate: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    t = np.arange(samples) / rate
    return (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None]


def _write_sine(out: Any, stream: Any, rate: int, samples: int) -> None:
    signal = sine(samples, rate)
    step = 960 if rate == 48000 else 1024
    for i in range(0, samples, step):
        frame = av.AudioFrame.from_ndarray(signal[:, i : i + step], format="flt", layout="mono")
        frame.sample_rate, frame.pts = rate, i
        out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


def frames_of(i: int) -> int:
    """The frame count of the ``i``-th video of :func:`make_vidqa_dataset` (all different)."""
    return 30 + 6 * i


def make_vidqa_dataset(root: Path, per_shard: int = 3, corrupt: Sequence[str] = ()) -> list[str]:
    """Two prepared shards of VidQA samples (``mp4`` + ``json``); returns the sample keys.

    Sample ``i`` has a ``frames_of(i)``-frame 30 fps video; its answer is that count. Samples
    named in ``corrupt`` get a truncated video instead.
    """
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset
    from tests.conftest import write_shard

    keys = []
    for s, shard in enumerate(("clips_a", "clips_b")):
        samples = []
        for j in range(per_shard):
            i = s * per_shard + j
            key = f"{shard}_{j:02d}"
            video = make_video(frames=frames_of(i), audio=i % 2 == 0)
            qa = {"question": f"how many frames has {key}?", "answers": [str(frames_of(i))]}
            mp4 = video[: len(video) // 3] if key in corrupt else video
            samples.append((key, {"mp4": mp4, "json": json.dumps(qa).encode()}))
            keys.append(key)
        write_shard(root / f"{shard}.tar", samples)
    field_map = {"video": "mp4", "context": "json[question]", "answers": "json[answers]"}
    prepare_dataset(
        str(root),
        split_parts=[("train", "clips_")],
        dataset_yaml=make_dataset_yaml("VidQASample", field_map),
    )
    return keys


#: (codec, options) of :func:`make_textured_video`: B-frames that other frames refer to
#: (b-pyramid) and ones nothing refers to, short groups of pictures, scene-cut keyframes.
TEXTURED_CODECS: dict[str, tuple[str, dict[str, str]]] = {
    "h264": ("libx264", {"g": "12", "bf": "3", "b-pyramid": "normal", "preset": "veryfast"}),
    "hevc": ("libx265", {"x265-params": "keyint=12:bframes=3:b-pyramid=1:log-level=error"}),
    "vp9": ("libvpx-vp9", {"g": "12", "deadline": "realtime", "cpu-used": "8"}),
}


def make_textured_video(
    codec: str = "h264", *, frames: int = 48, size: tuple[int, int] = (96, 64), fmt: str = "mp4"
) -> bytes:
    """A lossy video of a moving noise texture: a frame decoded from wrong references shows.

    Every frame differs from its neighbours, so a test can compare decoded pixels exactly with
    a plain decode of every frame.
    """
    name, options = TEXTURED_CODECS[codec]
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 64, (size[1], size[0] * 3, 3), dtype=np.uint8)
    texture = noise + np.linspace(0, 191, size[0] * 3, dtype=np.uint8)[None, :, None]
    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as out:
        stream = out.add_stream(name, rate=30, options=options)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for k in range(frames):
            shift = 2 * k % (size[0] * 2)
            image = np.ascontiguousarray(texture[:, shift : shift + size[0]])
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = k
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buf.getvalue()


def decode_every_frame(
    data: bytes, size: tuple[int, int] | None = None
) -> list[np.ndarray[Any, Any]]:
    """Every frame of ``data``'s first video as RGB, by a plain PyAV decode (the reference).

    Resized, when ``size`` (width, height) is given, with swscale's bilinear filter.
    """
    resize = {} if size is None else {"width": size[0], "height": size[1]}
    with av.open(io.BytesIO(data)) as container:
        return [
            frame.to_ndarray(format="rgb24", interpolation="BILINEAR", **resize)
            for frame in container.decode(video=0)
        ]
