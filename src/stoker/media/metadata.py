"""Media metadata records: what ``prepare-media`` stores per file, in Energon's JSON layout.

A record is ``(metadata_type, metadata_json)`` in the ``media_metadata`` table of
``index.sqlite``: type ``"av"`` for video and audio, ``"image"`` for images; the JSON holds the
fields that are known (``None`` fields are left out), as Energon writes and reads them.

Example:
    >>> kind, text = serialize_media_metadata(AVMetadata(video_fps=30.0, video_num_frames=60))
    >>> kind, text
    ('av', '{"video_num_frames":60,"video_fps":30.0}')
    >>> deserialize_media_metadata(kind, text).video_fps
    30.0
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from stoker.errors import FormatError


@dataclass
class AVMetadata:
    """Facts about a video or audio file: durations in seconds, sizes in pixels."""

    metadata_type: ClassVar[str] = "av"

    video_duration: float | None = None
    video_num_frames: int | None = None
    video_fps: float | None = None
    video_width: int | None = None
    video_height: int | None = None

    audio_duration: float | None = None
    audio_channels: int | None = None
    audio_sample_rate: int | None = None
    audio_num_samples: int | None = None


@dataclass
class ImageMetadata:
    """Facts about an encoded image: size, Pillow format name (``JPEG``) and mode (``RGB``)."""

    metadata_type: ClassVar[str] = "image"

    width: int
    height: int
    format: str
    mode: str


MediaMetadata = AVMetadata | ImageMetadata
_TYPES: dict[str, type[AVMetadata] | type[ImageMetadata]] = {
    "av": AVMetadata,
    "image": ImageMetadata,
}


def serialize_media_metadata(metadata: MediaMetadata) -> tuple[str, str]:
    """``(metadata_type, compact JSON of the known fields)``, as stored in ``index.sqlite``."""
    fields = {k: v for k, v in dataclasses.asdict(metadata).items() if v is not None}
    return metadata.metadata_type, json.dumps(fields, separators=(",", ":"))


def deserialize_media_metadata(metadata_type: str, metadata_json: str) -> MediaMetadata:
    """The record stored as ``(metadata_type, metadata_json)``; unknown fields are an error."""
    cls = _TYPES.get(metadata_type)
    if cls is None:
        raise FormatError(
            f"unknown media metadata type {metadata_type!r}.",
            hint=f"Known types: {', '.join(_TYPES)}; re-run `stoker prepare-media`.",
        )
    payload: dict[str, Any] = json.loads(metadata_json) if metadata_json else {}
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(payload) - names)
    if unknown:
        raise FormatError(
            f"media metadata of type {metadata_type!r} has unknown fields {unknown}.",
            hint="The index was written by a newer tool; re-run `stoker prepare-media`.",
        )
    return cls(**payload)
