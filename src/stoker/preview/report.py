"""The values a preview returns: a summary per field, per sample, and the report of a split.

Plain frozen dataclasses with no torch in sight, so the CLI can type its printing code against
them; :mod:`stoker.preview.read` fills them in and :mod:`stoker.preview.html` renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    #: The whole text where ``text`` was cut (shown on click in the HTML page).
    full_text: str | None = None


@dataclass(frozen=True)
class PreviewSample:
    """A sample: its key, where it is stored, and its fields (or why it failed to decode)."""

    key: str
    shard: str
    index: int
    offset: int
    fields: dict[str, FieldSummary] = field(default_factory=dict)
    error: str | None = None
    #: The sample's stored parts (``jpg``, ``txt``...) and their sizes in bytes.
    parts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PreviewReport:
    """The previewed samples of one split part."""

    path: str
    split_part: str
    sample_type: str
    total: int
    offset: int
    samples: list[PreviewSample]
    #: Facts for the page's header (shards, field map, media metadata...), in order.
    info: dict[str, str] = field(default_factory=dict)
    #: The seed the samples were drawn with (None: in order from ``offset``).
    seed: int | None = None
