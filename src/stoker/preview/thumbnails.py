"""Thumbnails for the HTML preview: images and video frames as small JPEG/PNG data URIs.

A CHW tensor or HWC array (uint8, or float in [0, 1]) becomes one self-contained ``data:`` URI,
its longest side at most :data:`THUMBNAIL_SIZE` pixels; a (T, C, H, W) video becomes a row of
up to :data:`MAX_FRAMES` evenly spaced frames.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import numpy.typing as npt
import torch

#: Longest side of a thumbnail, in pixels.
THUMBNAIL_SIZE = 256
#: Frames shown for a video tensor (evenly spaced).
MAX_FRAMES = 8


def image_data_uri(image: torch.Tensor | np.ndarray) -> str:
    """A thumbnail (JPEG, PNG with alpha) of a CHW tensor or HWC array, as a data URI."""
    from PIL import Image

    hwc = _to_hwc_uint8(image)
    pil = Image.fromarray(hwc[:, :, 0] if hwc.shape[2] == 1 else hwc)
    pil.thumbnail((THUMBNAIL_SIZE, THUMBNAIL_SIZE))
    fmt, mime = ("PNG", "image/png") if pil.mode == "RGBA" else ("JPEG", "image/jpeg")
    buf = io.BytesIO()
    pil.save(buf, format=fmt, **({"quality": 85} if fmt == "JPEG" else {}))
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def render_frames(video: torch.Tensor, max_frames: int = MAX_FRAMES) -> list[str]:
    """Thumbnails of up to ``max_frames`` evenly spaced frames of a (T, C, H, W) video tensor."""
    count = int(video.shape[0])
    picks = np.unique(np.linspace(0, count - 1, min(count, max_frames)).round().astype(int))
    return [image_data_uri(video[int(t)]) for t in picks]


def _to_hwc_uint8(image: torch.Tensor | np.ndarray) -> npt.NDArray[np.uint8]:
    if isinstance(image, torch.Tensor):
        arr = image.detach().cpu().permute(1, 2, 0).numpy()
    else:
        arr = np.asarray(image)
    if arr.dtype != np.uint8:
        arr = (np.clip(arr.astype(np.float32), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return np.ascontiguousarray(arr)
