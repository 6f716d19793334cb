"""Preview the first samples of a split: what every field holds, as text or as an HTML page.

:func:`preview_dataset` reads samples in order (no shuffle), decodes and maps them exactly as the
loader does, and summarises each field (type, shape, dtype, range, text). :func:`render_html`
turns the report into one self-contained page with images (and video frames) as thumbnails, so
a user can look at the data instead of reading tensors.

Example:
    >>> report = preview_dataset("coco-wds", num_samples=3)
    >>> report.samples[0].fields["image"].summary
    'image 3x48x64 uint8, min 38, max 255'
"""

from __future__ import annotations

from stoker.preview.html import render_html
from stoker.preview.read import EmptySplitError, drawn_refs, kept_refs, preview_dataset
from stoker.preview.report import FieldSummary, PreviewReport, PreviewSample
from stoker.preview.summary import MAX_TEXT, short, summarize, truncate
from stoker.preview.thumbnails import MAX_FRAMES, THUMBNAIL_SIZE, image_data_uri, render_frames

__all__ = [
    "MAX_FRAMES",
    "MAX_TEXT",
    "THUMBNAIL_SIZE",
    "EmptySplitError",
    "FieldSummary",
    "PreviewReport",
    "PreviewSample",
    "drawn_refs",
    "image_data_uri",
    "kept_refs",
    "preview_dataset",
    "render_frames",
    "render_html",
    "short",
    "summarize",
    "truncate",
]
