"""The file type a media value's first bytes say it is (its magic number), as an extension.

Example:
    >>> guess_extension(b"\\x89PNG\\r\\n\\x1a\\n..."), guess_extension(b"hello")
    ('png', None)
"""

from __future__ import annotations

_MAGIC: tuple[tuple[int, bytes, str], ...] = (
    (0, b"\xff\xd8\xff", "jpg"), (0, b"\x89PNG\r\n\x1a\n", "png"), (0, b"GIF8", "gif"),
    (8, b"WEBP", "webp"), (0, b"BM", "bmp"), (0, b"II*\x00", "tif"), (0, b"MM\x00*", "tif"),
    (4, b"ftyp", "mp4"), (0, b"\x1a\x45\xdf\xa3", "mkv"), (8, b"WAVE", "wav"),
    (0, b"fLaC", "flac"), (0, b"OggS", "ogg"), (0, b"ID3", "mp3"), (8, b"AVI ", "avi"),
    (4, b"jP  \r\n\x87\n", "jp2"), (0, b"\xffO\xffQ", "j2k"),
)  # fmt: skip

#: The extension a Hugging Face ``Image``/``Audio`` column's bytes get where their magic
#: number says nothing.
DEFAULT_MEDIA_EXT = {"image": "png", "audio": "wav"}


def guess_extension(data: bytes) -> str | None:
    """The extension implied by the magic number at the start of ``data``, if known."""
    for offset, magic, ext in _MAGIC:
        if data[offset : offset + len(magic)] == magic:
            return ext
    return None


__all__ = ["DEFAULT_MEDIA_EXT", "guess_extension"]
