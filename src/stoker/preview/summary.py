"""Summarise one decoded value for a preview: its kind, shape, dtype, range or (cut) text.

:func:`summarize` turns a tensor, array, PIL image, text, number, bytes, list or dict into a
:class:`~stoker.preview.report.FieldSummary`; images and videos get thumbnails
(:mod:`stoker.preview.thumbnails`) when asked for. :func:`short` and :func:`truncate` keep the
text of nested values on one short line.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch

from stoker.pipeline.decode import guess_extension
from stoker.preview.report import FieldSummary
from stoker.preview.thumbnails import image_data_uri, render_frames

#: Strings longer than this are cut, with an ellipsis.
MAX_TEXT = 200
_CHANNELS = (1, 3, 4)


def summarize(value: Any, thumbnails: bool = False) -> FieldSummary:
    """A summary of one decoded value (tensor, array, image, text, number, list, dict, bytes)."""
    from PIL import Image

    if isinstance(value, Image.Image):
        value = np.asarray(value.convert("RGBA" if "A" in value.mode else "RGB"))
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return _summarize_array(value, thumbnails)
    if value is None:
        return FieldSummary("none", "None")
    if isinstance(value, bool):
        return FieldSummary("bool", str(value))
    if isinstance(value, (int, float)):
        return FieldSummary("number", f"{type(value).__name__} {value}")
    if isinstance(value, str):
        cut = len(value) > MAX_TEXT
        return FieldSummary(
            "text",
            f"str, {len(value)} chars",
            text=truncate(value),
            full_text=value if cut else None,
        )
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        guess = guess_extension(data)
        return FieldSummary("bytes", f"bytes, {len(data)} B" + (f" ({guess}?)" if guess else ""))
    if isinstance(value, (list, tuple, dict)):
        kind = "dict" if isinstance(value, dict) else "list"
        return FieldSummary(kind, truncate(short(value)))
    if callable(getattr(value, "get_metadata", None)) and hasattr(value, "get_clips"):
        from stoker.preview.media import summarize_av

        return summarize_av(value, thumbnails)
    return FieldSummary("object", type(value).__name__)


def _summarize_array(value: torch.Tensor | np.ndarray, thumbnails: bool) -> FieldSummary:
    shape = tuple(int(d) for d in value.shape)
    dtype = str(value.dtype).removeprefix("torch.")
    kind = _array_kind(value)
    low, high = _range(value)
    summary = f"{kind} {'x'.join(map(str, shape)) or 'scalar'} {dtype}"
    if low is not None and high is not None:
        summary += f", min {low:.4g}, max {high:.4g}"
    images: tuple[str, ...] = ()
    if thumbnails and kind == "image":
        images = (image_data_uri(value),)
    elif thumbnails and kind == "video" and isinstance(value, torch.Tensor):
        images = tuple(render_frames(value))
    return FieldSummary(kind, summary, shape, dtype, low, high, thumbnails=images)


def _array_kind(value: torch.Tensor | np.ndarray) -> str:
    """``image`` for CHW tensors and HWC arrays, ``video`` for TCHW tensors, else tensor/array."""
    shape = tuple(value.shape)
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.uint8 or value.dtype.is_floating_point:
            if len(shape) == 3 and shape[0] in _CHANNELS and min(shape[1:]) > 4:
                return "image"
            if len(shape) == 4 and shape[1] in _CHANNELS and min(shape[2:]) > 4:
                return "video"
        return "tensor"
    pixels = value.dtype == np.uint8 or np.issubdtype(value.dtype, np.floating)
    if pixels and len(shape) == 3 and shape[2] in _CHANNELS and min(shape[:2]) > 4:
        return "image"
    return "array"


def _range(value: torch.Tensor | np.ndarray) -> tuple[float | None, float | None]:
    if isinstance(value, torch.Tensor):
        if value.numel() == 0 or value.is_complex():
            return None, None
        return float(value.min().item()), float(value.max().item())
    if value.size == 0 or not (np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_):
        return None, None
    if np.iscomplexobj(value):
        return None, None
    return float(value.min()), float(value.max())


def truncate(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def short(value: Any, depth: int = 0) -> str:
    """A compact one-line description of nested values, e.g. ``list[2]: ["a", tensor 3 int64]``."""
    if isinstance(value, (list, tuple, dict)):
        if depth >= 2:
            return f"{type(value).__name__}[{len(value)}]"
        if isinstance(value, dict):
            inner = ", ".join(f"{k}: {short(v, depth + 1)}" for k, v in list(value.items())[:8])
            more = ", …" if len(value) > 8 else ""
            return f"dict[{len(value)}]: {{{inner}{more}}}"
        inner = ", ".join(short(v, depth + 1) for v in value[:8])
        more = ", …" if len(value) > 8 else ""
        return f"{type(value).__name__}[{len(value)}]: [{inner}{more}]"
    if isinstance(value, str):
        return _quote(truncate(value, 60))
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (torch.Tensor, np.ndarray)):
        kind = _array_kind(value)
        dims = "x".join(map(str, value.shape)) or "scalar"
        return f"{kind} {dims} {str(value.dtype).removeprefix('torch.')}"
    return summarize(value).summary
