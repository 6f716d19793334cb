"""The benchmark videos' pictures and encodings, chosen by ``bench_av.py --content``.

* ``noise`` (the default, the data of every figure before 2026-11-25): a noise-textured
  gradient shifted 4 px per frame, x264 ``preset=veryfast``, a keyframe every 2 s. Noise makes
  keyframes ~170 kB (decoding one is ~11 ms of CABAC) and a pure shift makes x264 choose P-frames
  (~25 % of frames are B-frames nothing refers to).
* ``natural``: closer to camera footage as it is usually stored: a pan with changing speed over
  a smooth scene with mid-frequency detail, five objects moving on their own paths, light sensor
  grain, encoded with x264's defaults (``preset=medium``, keyframe interval 250, 3 B-frames with
  B-pyramid, what a plain ``ffmpeg -i in out.mp4`` writes). Keyframes are ~30 kB and about half
  the frames are B-frames nothing refers to.

Both are made once and cached; Energon and stoker read the same files in the same run.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

#: x264 options per content kind
ENCODINGS: dict[str, dict[str, str]] = {
    "noise": {"g": "60", "preset": "veryfast"},  # g = 2 s at 30 fps
    "natural": {},  # x264's defaults
}


def make_video(
    content: str, seconds: float, seed: int, fps: int = 30, size: tuple[int, int] = (854, 480)
) -> bytes:
    """An H.264 mp4 of ``content`` (``"noise"`` or ``"natural"``)."""
    import av

    pictures = _noise if content == "noise" else _natural
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps, options=ENCODINGS[content])
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for k, image in enumerate(pictures(round(seconds * fps), seed, size)):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = k
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return buf.getvalue()


def _noise(frames: int, seed: int, size: tuple[int, int]) -> Iterator[Any]:
    """Moving noise-textured gradients (the original benchmark content)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    texture = rng.integers(0, 64, (size[1], size[0] * 2, 3), dtype=np.uint8)
    ramp = np.linspace(0, 191, size[0] * 2, dtype=np.uint8)[None, :, None]
    for k in range(frames):
        shift = (4 * k) % size[0]
        yield np.ascontiguousarray((texture + ramp)[:, shift : shift + size[0]])


def _natural(frames: int, seed: int, size: tuple[int, int]) -> Iterator[Any]:
    """A pan over a smooth scene with moving objects and grain (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    w, h = size
    scene = _scene(rng, w * 2, h)
    grain = [rng.normal(0, 2, (h, w, 3)).astype(np.float32) for _ in range(8)]
    objects = [
        (*rng.uniform((0, 0, -6, -4, 20), (w, h, 6, 4, 60)), rng.integers(0, 255, 3))
        for _ in range(5)
    ]
    for k in range(frames):
        x0 = round(2 * k + 40 * np.sin(k / 40)) % w  # a pan that speeds up and slows down
        image = scene[:, x0 : x0 + w] + grain[k % len(grain)]
        for x, y, vx, vy, r, colour in objects:
            _disc(image, (x + vx * k) % w, (y + vy * k) % h, r, colour)
        yield np.clip(image, 0, 255).astype(np.uint8)


def _scene(rng: Any, width: int, height: int) -> Any:
    """Low-frequency waves (sky, walls, shading) plus blocky mid-frequency detail, float32."""
    import numpy as np

    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    scene = np.full((height, width, 3), 110, np.float32)
    for c in range(3):
        for _ in range(6):
            fx, fy = rng.uniform(0.5, 4) / width, rng.uniform(0.5, 3) / height
            wave = np.sin(2 * np.pi * (fx * xx + fy * yy) + rng.uniform(0, 6.3))
            scene[..., c] += rng.uniform(10, 30) * wave
    blocks = rng.normal(0, 12, (height // 8 + 1, width // 8 + 1, 3)).astype(np.float32)
    scene += np.kron(blocks, np.ones((8, 8, 1), np.float32))[:height, :width]
    return scene


def _disc(image: Any, cx: float, cy: float, r: float, colour: Any) -> None:
    import numpy as np

    h, w = image.shape[:2]
    x0, x1 = max(int(cx - r), 0), min(int(cx + r) + 1, w)
    y0, y1 = max(int(cy - r), 0), min(int(cy + r) + 1, h)
    gy, gx = np.mgrid[y0:y1, x0:x1]
    image[y0:y1, x0:x1][(gx - cx) ** 2 + (gy - cy) ** 2 < r * r] = colour
