"""Open media bytes with PyAV safely: codec threads off by default, FFmpeg errors as sample errors.

PyAV is imported here, on first use, so that importing stoker never loads it. Codec threads are
off unless asked for: a dataloader worker is forked, and FFmpeg threads alive across a fork (or
left to the garbage collector) can deadlock; the workers already decode in parallel.

Example:
    >>> with open_container(mp4_bytes) as container:
    ...     container.streams.video[0].average_rate
    Fraction(30, 1)
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from stoker.errors import SampleError, require

if TYPE_CHECKING:
    from av.container import InputContainer

T = TypeVar("T")
BAD_MEDIA_HINT = (
    "The file is corrupt, truncated or in a codec FFmpeg cannot decode; fix or drop it."
)


def import_av() -> ModuleType:
    """The ``av`` module, or a :class:`MissingDependencyError` that says how to install it."""
    return require("av", "reading video and audio")


def open_input(
    source: bytes | BinaryIO, threads: int = 0, *, probe_decode: bool = True
) -> InputContainer:
    """An open input container over ``source``; the caller closes it.

    Args:
        threads: Codec threads per stream; 0 (default) decodes in the calling thread only.
        probe_decode: Let FFmpeg decode the first frames while opening, as it does by default,
            to learn the pixel format. With False (what :class:`AVDecoder` uses) nothing is
            decoded while opening where the container gives the frame size (mp4, mkv, webm,
            avi...), which saves one keyframe decode per call; if it does not, the file is
            opened again the usual way.
    """
    container = _open(source, {} if probe_decode else _NO_PROBE_DECODE)
    if not probe_decode and any(not s.codec_context.width for s in _decodable_videos(container)):
        container.close()
        container = _open(source, {})
    for s in container.streams:
        codec = s.codec_context
        if codec is not None:
            codec.thread_type = "SLICE" if threads else "NONE"
            codec.thread_count = max(threads, 1)
    return container


#: Codec options for FFmpeg's stream probing only: decode nothing (the decoders used later are
#: opened without them).
_NO_PROBE_DECODE = {"skip_frame": "all"}


def _open(source: bytes | BinaryIO, options: dict[str, str]) -> InputContainer:
    av = import_av()
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    stream.seek(0)
    try:
        container: InputContainer = av.open(stream, "r", options=options)
    except (av.FFmpegError, ValueError, OSError) as e:
        raise SampleError(f"cannot open the media: {_reason(e)}", hint=BAD_MEDIA_HINT) from e
    return container


def _decodable_videos(container: InputContainer) -> list[Any]:
    return [s for s in container.streams.video if s.codec_context is not None]


@contextlib.contextmanager
def open_container(
    source: bytes | BinaryIO, threads: int = 0, *, probe_decode: bool = True
) -> Iterator[InputContainer]:
    """:func:`open_input` as a context manager; FFmpeg errors inside become :class:`SampleError`."""
    av = import_av()
    container = open_input(source, threads, probe_decode=probe_decode)
    try:
        yield container
    except av.FFmpegError as e:
        raise SampleError(f"cannot decode the media: {_reason(e)}", hint=BAD_MEDIA_HINT) from e
    finally:
        container.close()


def _reason(error: Exception) -> str:
    """FFmpeg's reason without the file name PyAV appends (an in-memory file's repr)."""
    reason = getattr(error, "strerror", None)
    return reason if isinstance(reason, str) and reason else str(error)


@contextlib.contextmanager
def closing_iterator(iterator: Iterator[T]) -> Iterator[Iterator[T]]:
    """Close a PyAV decoding generator on exit, while its container is still open.

    Left to the garbage collector, it could be finalised after its container closed, or in a
    forked worker, and crash there.
    """
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


def first_stream(container: InputContainer, kind: str) -> Any:
    """The first ``"video"`` or ``"audio"`` stream, if FFmpeg can decode it.

    Raises:
        SampleError: the media has no such stream, or FFmpeg has no decoder for its codec.
    """
    streams = getattr(container.streams, kind)
    if not streams:
        raise SampleError(
            f"the media has no {kind} stream, but {kind} was requested.",
            hint=f"Ask only for the streams the file has (has_{kind}_stream()).",
        )
    if streams[0].codec_context is None:
        raise SampleError(
            f"FFmpeg has no decoder for the codec of the {kind} stream.",
            hint="Re-encode the file with a common codec (H.264, VP9, AAC, Opus, FLAC).",
        )
    return streams[0]
