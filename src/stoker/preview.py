"""Preview the first samples of a split: what every field holds, as text or as an HTML page.

:func:`preview_dataset` reads samples in order (no shuffle), decodes and maps them exactly as the
loader does, and summarises each field (type, shape, dtype, range, text). :func:`render_html`
turns the report into one self-contained page with images (and video frames) as thumbnails, so
a user can look at the data instead of reading tensors.

Example:
    >>> report = preview_dataset("/data/coco-wds", num_samples=3)  # doctest: +SKIP
    >>> report.samples[0].fields["image"].summary  # doctest: +SKIP
    'image 3x480x640 uint8, min 0, max 255'
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from stoker.errors import ConfigError, StokerError
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.pipeline.build import SampleBuilder
from stoker.pipeline.decode import ImageDecoderType, SampleDecoder, guess_extension
from stoker.pipeline.errors import SampleError
from stoker.pipeline.read import RawSample
from stoker.plan import global_to_shard
from stoker.sources import DataSource, load_source

#: Strings longer than this are cut, with an ellipsis.
MAX_TEXT = 200
#: Longest side of a thumbnail, in pixels.
THUMBNAIL_SIZE = 256
#: Frames shown for a video tensor (evenly spaced).
MAX_FRAMES = 8
_CHANNELS = (1, 3, 4)


@dataclass(frozen=True)
class FieldSummary:
    """One field of a sample, summarised.

    ``kind`` is one of image, video, tensor, array, text, number, bool, bytes, list, dict, none,
    object. ``thumbnails`` holds data URIs (one per image, a row of frames per video), filled
    only when asked for.
    """

    kind: str
    summary: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    min: float | None = None
    max: float | None = None
    text: str | None = None
    thumbnails: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreviewSample:
    """A sample: its key, where it is stored, and its fields (or why it failed to decode)."""

    key: str
    shard: str
    index: int
    offset: int
    fields: dict[str, FieldSummary] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class PreviewReport:
    """The previewed samples of one split part."""

    path: str
    split_part: str
    sample_type: str
    total: int
    offset: int
    samples: list[PreviewSample]


def preview_dataset(
    path: str,
    *,
    split_part: str = "train",
    num_samples: int = 5,
    offset: int = 0,
    image_decode: ImageDecoderType = "torchrgb8",
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
    trust_sample_loader: bool = False,
    thumbnails: bool = False,
) -> PreviewReport:
    """Samples ``offset`` to ``offset + num_samples`` of the split, in order, summarised.

    A sample that cannot be decoded or mapped is reported with its error instead of stopping
    the preview; dataset-level problems (missing metadata or shards) raise.
    """
    if num_samples < 1 or offset < 0:
        raise ConfigError(f"invalid {num_samples=} or {offset=}.", hint="Use n >= 1, offset >= 0.")
    source = load_source(
        path,
        split_part=split_part,
        split_config=split_config,
        dataset_config=dataset_config,
        trust_sample_loader=trust_sample_loader,
    )
    if offset >= source.total:
        raise ConfigError(
            f"{offset=} is past the end of split {split_part!r} ({source.total} samples).",
            hint="Use a smaller --offset.",
        )
    refs = kept_refs(int(source.counts.sum()), source.excluded, offset, num_samples)
    shard_ids, indices = global_to_shard(source.counts, refs)
    builder = SampleBuilder(source, SampleDecoder(image_decode=image_decode))
    reader = source.reader()
    try:
        samples = [
            _preview_one(source, builder, reader.read(int(s), int(i)), ref, thumbnails)
            for s, i, ref in zip(shard_ids, indices, refs, strict=True)
        ]
    finally:
        reader.close()
    return PreviewReport(path, split_part, _type_name(source), source.total, offset, samples)


def kept_refs(count: int, excluded: npt.NDArray[np.int64], offset: int, n: int) -> list[int]:
    """Up to ``n`` global indices below ``count``, from the ``offset``-th not ``excluded`` one.

    Example:
        >>> kept_refs(10, np.array([1, 2, 5]), 1, 3)
        [3, 4, 6]
    """
    ref = offset
    for e in np.unique(excluded).tolist():
        if e > ref:
            break
        ref += 1
    skip = set(excluded.tolist())
    refs: list[int] = []
    while ref < count and len(refs) < n:
        if ref not in skip:
            refs.append(ref)
        ref += 1
    return refs


def _preview_one(
    source: DataSource, builder: SampleBuilder, raw: RawSample, ref: int, thumbnails: bool
) -> PreviewSample:
    error: str | None = None
    fields: dict[str, FieldSummary] = {}
    try:
        sample = builder.build(raw, ref)
    except SampleError as e:
        error = e.message
    except StokerError:
        raise  # a dataset-level problem (config, storage): every sample would fail
    except Exception as e:  # a user sample_loader's bug: show it on this sample
        error = f"{type(e).__name__}: {e}"
    else:
        values = _fields(sample, source.jsonl)
        fields = {name: summarize(value, thumbnails) for name, value in values.items()}
    return PreviewSample(raw.key, raw.shard, raw.index, raw.offset, fields, error)


def _fields(sample: Any, jsonl: bool) -> dict[str, Any]:
    """The user-visible fields: dataclass fields or dict parts, without ``__meta__`` entries."""
    if dataclasses.is_dataclass(sample) and not isinstance(sample, type):
        items = {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}
    else:
        items = dict(sample)
    fields = {k: v for k, v in items.items() if not k.startswith("__")}
    if jsonl and isinstance(fields.get("json"), dict):
        # One JSON object per line: show its keys, named as a field_map would access them.
        return {f"json[{k}]": v for k, v in fields["json"].items()}
    return fields


def _type_name(source: DataSource) -> str:
    if source.jsonl:
        return "JSONL (crude)"
    return source.config.sample_type or "CrudeWebdataset"


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
        return FieldSummary("text", f"str, {len(value)} chars", text=truncate(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        guess = guess_extension(data)
        return FieldSummary("bytes", f"bytes, {len(data)} B" + (f" ({guess}?)" if guess else ""))
    if isinstance(value, (list, tuple, dict)):
        kind = "dict" if isinstance(value, dict) else "list"
        return FieldSummary(kind, truncate(short(value)))
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


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;background:#f4f4f6;color:#222}
.card{background:#fff;border-radius:8px;padding:1em;margin:0 0 1em;box-shadow:0 1px 3px #0002}
.card h2{font-size:1.05em;margin:0 0 .2em;font-family:monospace}
.where{color:#666;font-size:.85em;margin-bottom:.6em}
table{border-collapse:collapse;width:100%}
td{vertical-align:top;padding:.3em .6em;border-top:1px solid #eee}
td.name{font-family:monospace;font-weight:bold;width:12em}
.summary{font-family:monospace;font-size:.85em;color:#555}
.text{white-space:pre-wrap;margin-top:.2em}
.error{color:#b00020;font-family:monospace}
img{max-width:256px;max-height:256px;margin:.3em .3em 0 0;border:1px solid #ddd}
"""


def render_html(report: PreviewReport) -> str:
    """A self-contained HTML page with one card per sample (all text escaped)."""
    esc = html.escape
    title = f"{report.path} [{report.split_part}]"
    heading = (
        f"<h1>{esc(title)}</h1><p>{esc(report.sample_type)}, samples {report.offset} to "
        f"{report.offset + len(report.samples) - 1} of {report.total}</p>"
    )
    cards = "\n".join(_card(sample) for sample in report.samples)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stoker preview: {esc(title)}</title><style>{_CSS}</style></head>\n"
        f"<body>{heading}\n{cards}\n</body></html>\n"
    )


def _card(sample: PreviewSample) -> str:
    esc = html.escape
    where = f"{sample.shard}, sample {sample.index}, byte offset {sample.offset}"
    body = f'<p class="error">{esc(sample.error)}</p>' if sample.error else _field_table(sample)
    return (
        f'<div class="card"><h2>{esc(sample.key)}</h2>'
        f'<div class="where">{esc(where)}</div>{body}</div>'
    )


def _field_table(sample: PreviewSample) -> str:
    esc = html.escape
    rows = []
    for name, summary in sample.fields.items():
        cell = f'<div class="summary">{esc(summary.summary)}</div>'
        if summary.text is not None:
            cell += f'<div class="text">{esc(summary.text)}</div>'
        cell += "".join(f'<img src="{uri}" alt="{esc(name)}">' for uri in summary.thumbnails)
        rows.append(f'<tr><td class="name">{esc(name)}</td><td>{cell}</td></tr>')
    return f"<table>{''.join(rows)}</table>"
