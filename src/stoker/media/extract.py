"""Which files are media, and their metadata: the filter of ``prepare-media`` and the probes.

Three ways to pick media, as Energon's ``--media-metadata-by-*`` flags: by file extension, by
glob patterns on the member name, or by the file's header bytes. Images are probed with Pillow
(header only), video and audio with one PyAV demuxing pass; nothing imports torch.

Example:
    >>> media = MediaFilter.parse(glob="*.mp4,*.jpg")
    >>> media.wants("clip_007.mp4"), media.wants("clip_007.json")
    (True, False)
"""

from __future__ import annotations

import fnmatch
import io
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import IO, Literal

from stoker.errors import ConfigError, require
from stoker.media.metadata import ImageMetadata, MediaMetadata

Strategy = Literal["EXTENSION", "GLOB", "HEADER"]
MediaKind = Literal["image", "av"]
IMAGE_EXTENSIONS = frozenset(
    ["bmp", "gif", "ico", "j2k", "jp2", "jpx", "jpeg", "jpg", "png", "tif", "tiff", "webp"]
)  # fmt: skip
AV_EXTENSIONS = frozenset(
    ["aac", "avi", "flac", "m4a", "m4v", "mkv", "mov", "mp3", "mp4", "ogg", "wav", "webm"]
)
#: How many bytes of a file the HEADER strategy looks at.
HEADER_BYTES = 16
#: (offset, magic bytes, kind) of the headers recognised by the HEADER strategy.
_MAGIC: tuple[tuple[int, bytes, MediaKind], ...] = (
    (0, b"\xff\xd8\xff", "image"), (0, b"\x89PNG\r\n\x1a\n", "image"), (0, b"GIF8", "image"),
    (8, b"WEBP", "image"), (0, b"BM", "image"), (0, b"II*\x00", "image"),
    (0, b"MM\x00*", "image"), (0, b"\x00\x00\x00\x0cjP  ", "image"),
    (4, b"ftyp", "av"), (0, b"\x1a\x45\xdf\xa3", "av"), (8, b"WAVE", "av"), (8, b"AVI ", "av"),
    (0, b"fLaC", "av"), (0, b"OggS", "av"), (0, b"ID3", "av"), (0, b"\xff\xfb", "av"),
    (0, b"\xff\xf1", "av"), (0, b"\xff\xf9", "av"),
)  # fmt: skip


class MediaFilterStrategy(str, Enum):
    """Energon's names for the three strategies (``MediaFilter.strategy`` holds the values)."""

    EXTENSION = "EXTENSION"
    HEADER = "HEADER"
    GLOB = "GLOB"


@dataclass(frozen=True)
class MediaFilter:
    """How ``prepare-media`` picks the files to probe (exactly one strategy).

    Also available as ``MediaFilterConfig``, Energon's name; ``strategy`` may be given as a
    :class:`MediaFilterStrategy` and ``patterns`` as a list, as Energon takes them.
    """

    strategy: Strategy
    patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        strategy = getattr(self.strategy, "value", self.strategy)
        if strategy not in ("EXTENSION", "GLOB", "HEADER"):
            raise ConfigError(
                f"unknown media filter strategy={strategy!r}.",
                hint="Use EXTENSION, GLOB (with patterns) or HEADER.",
            )
        object.__setattr__(self, "strategy", str(strategy))
        object.__setattr__(self, "patterns", tuple(self.patterns))

    @classmethod
    def parse(
        cls, glob: str | None = None, header: bool = False, extension: bool = False
    ) -> MediaFilter:
        """The filter for the CLI flags; ``glob`` may hold several patterns joined by commas."""
        if sum((bool(glob), header, extension)) != 1:
            raise ConfigError(
                "choose exactly one media filter.",
                hint="Pass one of --media-metadata-by-extension, --media-metadata-by-glob "
                "'*.mp4,*.jpg' or --media-metadata-by-header.",
            )
        if glob:
            return cls("GLOB", tuple(p.strip() for p in glob.split(",") if p.strip()))
        return cls("HEADER" if header else "EXTENSION")

    def wants(self, name: str) -> bool:
        """Whether the member ``name`` may be media (HEADER: always; its bytes decide)."""
        lower = name.lower()
        if self.strategy == "GLOB":
            return any(fnmatch.fnmatch(lower, p.lower()) for p in self.patterns)
        return self.strategy == "HEADER" or kind_by_extension(lower) is not None

    def kind(self, name: str, data: bytes) -> MediaKind | None:
        """The kind of media ``data`` is, or None if the filter does not take it."""
        if not self.wants(name):
            return None
        by_name = kind_by_extension(name.lower())
        if self.strategy == "HEADER":
            return kind_by_header(data) or by_name
        return by_name

    def extract(self, name: str, data: bytes) -> MediaMetadata | None:
        """The metadata of ``data`` if the filter takes it (errors: unreadable media)."""
        kind = self.kind(name, data[:HEADER_BYTES])
        return None if kind is None else probe(kind, data)

    def should_consider_all(self) -> bool:
        """Energon's name: whether every file's bytes must be looked at (HEADER)."""
        return self.strategy == "HEADER"

    def should_consider_media(self, name: str) -> bool:
        """Energon's name for :meth:`wants`."""
        return self.wants(name)

    def extract_metadata(
        self, source: bytes | str | Path | IO[bytes], filename: str | None = None
    ) -> MediaMetadata | None:
        """Energon's name for :meth:`extract`; ``source`` may also be a path or an open file."""
        if isinstance(source, str | Path):
            filename = filename or Path(source).name
            data = Path(source).read_bytes()
        else:
            data = source if isinstance(source, bytes) else source.read()
        if filename is None:
            raise ConfigError("extract_metadata needs the filename of bytes or a stream.")
        return self.extract(filename, data)


#: Energon's name of :class:`MediaFilter`.
MediaFilterConfig = MediaFilter


def kind_by_extension(name: str) -> MediaKind | None:
    ext = name.rpartition(".")[2]
    return "image" if ext in IMAGE_EXTENSIONS else "av" if ext in AV_EXTENSIONS else None


def kind_by_header(data: bytes) -> MediaKind | None:
    for offset, magic, kind in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return kind
    return None


def probe(kind: MediaKind, data: bytes) -> MediaMetadata:
    """The metadata of an image or a video/audio file; raises if it cannot be read."""
    return image_metadata(data) if kind == "image" else av_file_metadata(data)


def image_metadata(data: bytes) -> ImageMetadata:
    """Size, format and mode of an encoded image, from its header."""
    Image = require("PIL.Image", "reading image metadata")

    try:
        opened = Image.open(io.BytesIO(data))
    except Image.UnidentifiedImageError:  # its message shows an in-memory file's repr
        raise ValueError("not an image Pillow can read") from None
    with opened as image:
        return ImageMetadata(
            width=image.width,
            height=image.height,
            format=image.format or "UNKNOWN",
            mode=image.mode or "UNKNOWN",
        )


def av_file_metadata(data: bytes) -> MediaMetadata:
    """Frame count, fps, duration, size, audio rate, channels and exact audio sample count."""
    from stoker.media.container import open_container
    from stoker.media.probe import av_metadata, count_audio_samples, index_streams

    with open_container(data, probe_decode=False) as container:
        meta = av_metadata(container, *index_streams(container))
        if meta.audio_sample_rate is not None:  # decoded and counted, as Energon stores it
            meta.audio_num_samples, seconds = count_audio_samples(container)
            meta.audio_duration = meta.audio_duration if seconds is None else seconds
        return meta
