"""Where one clip's CPU time goes, measured in one process on the benchmark's own videos.

Run by ``bench_av.py --phases``. For each video, the clip of the benchmark
(``get_single_frames_uniform(decoder, 8, video_out_frame_size=(224, 224))``) is made through
stoker with timers around the calls into PyAV (open, the packet index, each seek, demuxing
after a seek, each packet fed to the decoder, colour conversion + resize), and whole clips are
timed as they are (stoker; stoker without skipping frames nothing refers to; stoker letting
FFmpeg decode while opening; Energon; decoding every frame; stoker with codec threads).
Figures are CPU ms per clip (``time.process_time``), the minimum of ``--phase-repeats`` runs per
video, then the median over the videos: steady on a busy machine, where wall time is not.
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tarfile
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FRAMES, SIZE = 8, (224, 224)


def videos(path: Path, limit: int) -> list[bytes]:
    """The first ``limit`` mp4 parts of the prepared dataset at ``path``."""
    found: list[bytes] = []
    for shard in sorted(path.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                if member.name.endswith(".mp4") and len(found) < limit:
                    found.append(tar.extractfile(member).read())  # type: ignore[union-attr]
    return found


class Timers:
    """CPU ms and call counts by phase name."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def timed(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.ms[name] += 1e3 * (time.process_time() - start)
            self.calls[name] += 1


class _TimedCodec:
    """A codec context whose ``decode`` calls are timed (keyframe / other / skipped / drain)."""

    def __init__(self, codec: Any, timers: Timers) -> None:
        object.__setattr__(self, "_codec", codec)
        object.__setattr__(self, "_timers", timers)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._codec, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._codec, name, value)

    def decode(self, packet: Any = None) -> Any:
        if packet is None:
            name = "decode: drain after the last wanted frame"
        elif packet.is_keyframe:
            name = "decode: keyframes"
        elif str(self._codec.skip_frame).endswith("NONREF"):
            name = "decode: other frames, NONREF (skipped if nothing refers to them)"
        else:
            name = "decode: other frames, in full"
        return self._timers.timed(name, self._codec.decode, packet)


def instrumented_clip(data: bytes, timers: Timers) -> Any:
    """The benchmark's clip through stoker, with every call into PyAV timed."""
    import stoker.media.av_decoder as av_decoder
    import stoker.media.video as video
    import stoker.media.video_reader as reader
    from stoker import AVDecoder, get_single_frames_uniform

    saved = (av_decoder.open_container, av_decoder.index_streams, reader._GroupReader._seek)
    saved_init = reader._GroupReader.__init__
    saved_av = video.import_av

    @contextlib.contextmanager
    def open_container(*args: Any, **kwargs: Any) -> Iterator[Any]:
        opened = saved[0](*args, **kwargs)
        container = timers.timed("open (no probing decode)", opened.__enter__)
        try:
            yield container
        finally:
            timers.timed("close", opened.__exit__, None, None, None)

    def index_streams(container: Any) -> Any:
        return timers.timed("index: demux every packet", saved[1], container)

    def seek(self: Any, pts: int) -> Iterator[Any]:
        packets = timers.timed("seek", saved[2], self, pts)
        while True:
            packet = timers.timed("demux after a seek", next, packets, None)
            if packet is None:
                return
            yield packet

    def init(self: Any, *args: Any) -> None:
        saved_init(self, *args)
        self._codec = _TimedCodec(self._codec, timers)

    def import_av() -> Any:
        reformatter = saved_av().video.reformatter.VideoReformatter

        def timed_reformatter() -> Any:
            return _TimedReformatter(reformatter(), timers)

        return SimpleNamespace(video=SimpleNamespace(reformatter=SimpleNamespace(
            VideoReformatter=timed_reformatter
        )))  # fmt: skip

    av_decoder.open_container, av_decoder.index_streams = open_container, index_streams  # type: ignore[assignment]
    reader._GroupReader._seek, reader._GroupReader.__init__ = seek, init  # type: ignore[method-assign, assignment]
    video.import_av = import_av  # type: ignore[assignment]
    try:
        return timers.timed(
            "whole clip",
            get_single_frames_uniform,
            AVDecoder(data),
            FRAMES,
            video_out_frame_size=SIZE,
        )
    finally:
        av_decoder.open_container, av_decoder.index_streams, reader._GroupReader._seek = saved
        reader._GroupReader.__init__ = saved_init  # type: ignore[method-assign]
        video.import_av = saved_av


class _TimedReformatter:
    def __init__(self, reformatter: Any, timers: Timers) -> None:
        self._reformatter, self._timers = reformatter, timers

    def reformat(self, frame: Any, **kwargs: Any) -> Any:
        name = "colour conversion + resize (swscale)"
        return self._timers.timed(name, self._reformatter.reformat, frame, **kwargs)


def whole_clips(threads: int) -> dict[str, Callable[[bytes], Any]]:
    """Ways to make the clip, each a function of the video's bytes."""
    import stoker.media.av_decoder as av_decoder
    import stoker.media.video_reader as reader
    from stoker import AVDecoder, get_single_frames_uniform

    def stoker_clip(data: bytes, **kwargs: Any) -> Any:
        decoder = AVDecoder(data, **kwargs)
        return get_single_frames_uniform(decoder, FRAMES, video_out_frame_size=SIZE)

    def without_nonref(data: bytes) -> Any:
        saved = reader.NonRefPolicy
        reader.NonRefPolicy = lambda codec, extradata: saved("none", None)  # type: ignore[assignment, misc]
        try:
            return stoker_clip(data)
        finally:
            reader.NonRefPolicy = saved  # type: ignore[misc]

    def with_probe_decode(data: bytes) -> Any:
        saved = av_decoder.open_container

        def probing(*args: Any, **kwargs: Any) -> Any:
            return saved(*args, **{**kwargs, "probe_decode": True})

        av_decoder.open_container = probing  # type: ignore[assignment]
        try:
            return stoker_clip(data)
        finally:
            av_decoder.open_container = saved

    ways: dict[str, Callable[[bytes], Any]] = {
        "stoker": stoker_clip,
        "stoker, no NONREF skipping": without_nonref,
        "stoker, FFmpeg's probing decode on open": with_probe_decode,
        f"stoker, threads={threads} (slice)": lambda d: stoker_clip(d, threads=threads),
        "decode every frame (PyAV)": decode_every_frame,
    }
    try:
        from megatron.energon.av import AVDecoder as EnergonDecoder
        from megatron.energon.av import get_single_frames_uniform as energon_frames
    except ImportError:
        return ways

    def energon(data: bytes) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            decoder = EnergonDecoder(io.BytesIO(data))
            return energon_frames(decoder, FRAMES, video_out_frame_size=SIZE)

    ways["energon"] = energon
    return ways


def decode_every_frame(data: bytes) -> Any:
    import av
    import numpy as np

    with av.open(io.BytesIO(data)) as container:
        container.streams.video[0].thread_type = "NONE"
        frames = list(container.decode(video=0))
    keep = np.linspace(0, len(frames) - 1, FRAMES).round().astype(int)
    return [frames[i].to_ndarray(format="rgb24", width=SIZE[0], height=SIZE[1]) for i in keep]


def best_of(repeats: int, fn: Callable[[bytes], Any], data: bytes) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn(data)
        best = min(best, time.process_time() - start)
    return 1e3 * best


def run(path: Path, limit: int, repeats: int, threads: int = 2) -> None:
    """Print the per-phase table and the whole-clip comparison."""
    import torch

    torch.set_num_threads(1)  # as in a dataloader worker
    data = videos(path, limit)
    phases: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, list[int]] = defaultdict(list)
    for video in data:
        runs = []
        for _ in range(repeats):
            timers = Timers()
            instrumented_clip(video, timers)
            runs.append(timers)
        best = min(runs, key=lambda t: t.ms["whole clip"])
        for name, ms in best.ms.items():
            phases[name].append(ms)
            calls[name].append(best.calls[name])
    print(f"\nPer clip, CPU ms (median over {len(data)} videos of the best of {repeats} runs):")
    total = statistics.median(phases["whole clip"])
    accounted = 0.0
    for name in sorted(phases, key=lambda n: (n == "whole clip", -statistics.median(phases[n]))):
        ms = statistics.median(phases[name])
        accounted += 0 if name == "whole clip" else ms
        print(f"  {name:<66} {ms:7.1f} ms  {statistics.median(calls[name]):6.0f} calls")
    print(f"  {'rest (Python around the calls, tensors)':<66} {total - accounted:7.1f} ms")
    print(f"\nWhole clips, CPU ms (median over {len(data)} videos of the best of {repeats}):")
    results = {}
    for name, way in whole_clips(threads).items():
        results[name] = statistics.median(best_of(repeats, way, v) for v in data)
        print(f"  {name:<44} {results[name]:7.1f} ms", flush=True)
    for other in ("energon", "decode every frame (PyAV)"):
        if other in results:
            print(f"stoker / {other}: {results[other] / results['stoker']:.2f}x clips per CPU s")
