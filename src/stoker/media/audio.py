"""Audio clips, exact to the sample: seek before the clip, decode, cut at the sample boundary.

Sample ``n`` of a stream plays at ``n / sample_rate`` seconds of the container's timeline.
A range ``(start, end)`` in seconds holds ``round((end - start) * rate)`` samples from sample
``round(start * rate)`` on (fewer where the stream ends first); in samples it holds ``start`` to
``end`` exclusive. As in Energon, a range that starts past the end of the stream is left out of
the result and one that ends past it stops there. Clips are ``(channels, samples)`` arrays in
the codec's sample type (float32 for most compressed codecs, int16 for 16-bit PCM), as Energon
returns them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from stoker.errors import SampleError
from stoker.media.container import closing_iterator
from stoker.media.limits import AVLimits
from stoker.media.probe import StreamIndex

if TYPE_CHECKING:
    from av.container import InputContainer

AudioUnit = Literal["samples", "seconds"]
SampleSpan = tuple[int, int]  # [first sample, end sample)


def sample_spans(
    index: StreamIndex, rate: int, ranges: Sequence[tuple[float, float]], unit: AudioUnit
) -> list[SampleSpan]:
    """Each range as ``[first, end)`` sample numbers; ranges starting past the end are left out.

    A range in seconds holds ``round((end - start) * rate)`` samples wherever it starts, so
    ranges of one duration give clips of one length (unless cut by the end of the stream).
    """
    if unit not in ("samples", "seconds"):
        raise SampleError(f"unknown audio_unit={unit!r}.", hint="Use 'seconds' or 'samples'.")
    scale = 1 if unit == "samples" else rate
    stream_end = round(float(index.end_pts * index.time_base) * rate)
    spans = []
    for start, end in ranges:
        first = max(round(start * scale), 0)
        if first >= stream_end:  # no sample: left out of the result, as in Energon
            continue
        length = math.inf if math.isinf(end) else round((end - start) * scale)
        last = int(min(first + length, stream_end))
        spans.append((first, max(first, last)))
    return spans


def decode_samples(
    container: InputContainer, index: StreamIndex, spans: Sequence[SampleSpan], limits: AVLimits
) -> list[tuple[int, npt.NDArray[Any]]]:
    """``(first sample, (channels, samples) array)`` per span, from the first audio stream.

    The first sample is later than the span's where the audio starts later (encoder delay).
    """
    stream = container.streams.audio[0]
    rate = int(stream.sample_rate)
    channels = max(int(stream.codec_context.channels), 1)
    for first, end in spans:
        limits.check_seconds((end - first) / rate)
    limits.check_bytes(sum(end - first for first, end in spans) * channels * 8)
    return [_decode_span(container, stream, index, span, rate) for span in spans]


def _decode_span(
    container: InputContainer, stream: Any, index: StreamIndex, span: SampleSpan, rate: int
) -> tuple[int, npt.NDArray[Any]]:
    first, end = span
    chunks: list[npt.NDArray[Any]] = []
    began = first
    # Closed here, while the container is open: never left to the garbage collector.
    with contextlib.closing(_frames_from(container, stream, index, first / rate, rate)) as frames:
        for offset, samples in frames:
            lo, hi = max(first - offset, 0), min(end - offset, samples.shape[1])
            if hi > lo:
                began = offset + lo if not chunks else began
                chunks.append(samples[:, lo:hi])
            if offset + samples.shape[1] >= end:
                break
    if not chunks:
        raise SampleError(
            f"no audio decoded for samples {first}..{end}.",
            hint="The file is corrupt or truncated; fix or drop it.",
        )
    return began, np.concatenate(chunks, axis=1)


def _frames_from(
    container: InputContainer, stream: Any, index: StreamIndex, seconds: float, rate: int
) -> Generator[tuple[int, npt.NDArray[Any]], None, None]:
    """(first sample number, samples) of each frame, from the frame holding ``seconds`` on."""
    packet = max(index.at_or_before(seconds), 0)
    container.seek(int(index.pts[packet]), stream=stream, backward=True, any_frame=False)
    target = round(seconds * rate)
    with closing_iterator(container.decode(stream)) as decoded:
        for i, frame in enumerate(decoded):
            if frame.pts is None:
                raise SampleError("an audio frame has no timestamp.", hint="Remux the file.")
            offset = round(float(frame.pts * frame.time_base) * rate)
            if i == 0 and offset > target and packet > 0:  # seek overshot: start from the top
                break
            yield offset, planar(frame)
        else:
            return
    yield from _frames_from(container, stream, index, 0.0, rate)


def planar(frame: Any) -> npt.NDArray[Any]:
    """A decoded audio frame as a ``(channels, samples)`` array."""
    array: npt.NDArray[Any] = frame.to_ndarray()
    if frame.format.is_planar:
        return array
    channels = len(frame.layout.channels)
    by_channel: npt.NDArray[Any] = array.reshape(frame.samples, channels).transpose()
    return by_channel
