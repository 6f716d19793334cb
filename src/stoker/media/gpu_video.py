"""Video clips decoded on the GPU (NVDEC through PyNvVideoCodec), behind ``AVDecoder``'s calls.

``AVDecoder(data, device=0)`` (or ``SampleDecoder(video_decode_device=0)``) decodes the video of
``get_clips``/``get_video_clips``/``get_frames`` on that CUDA device: the ranges become frame
spans exactly as on the CPU (the same packet index, :func:`stoker.media.video.frame_spans`), and
NVDEC decodes those frames by index into ``(T, 3, H, W)`` uint8 CUDA tensors (resized by bilinear
interpolation on the GPU where ``video_out_frame_size`` is given). The colour conversion is
NVDEC's, so pixels may differ from FFmpeg's by a few levels. Audio stays on the CPU.

Where CUDA or PyNvVideoCodec is missing, or NVDEC refuses the file (a codec it lacks), the clip
is decoded on the CPU as before, with one warning per process and reason. CUDA cannot be used in
a dataloader worker forked from a process that has used it: decode on the GPU in the main
process, in spawned workers, or with ``num_workers=0`` (docs/gpu.md).

Example:
    >>> GpuVideo(0).problem() is None or GpuVideo(0).problem().startswith(("CUDA", "the package"))
    True
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import TYPE_CHECKING, Any

import torch
import torch.utils.dlpack

from stoker.errors import require
from stoker.media.clips import Clips, Ranges
from stoker.media.container import first_stream
from stoker.media.gpu_support import cuda_usable, gpu_problem, warn_once
from stoker.media.limits import AVLimits
from stoker.media.probe import StreamIndex, require_frames
from stoker.media.video import VideoUnit, frame_spans

if TYPE_CHECKING:
    from av.container import InputContainer

#: Where the file NVDEC reads is written (PyNvVideoCodec's decoder opens files by path).
_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None
_local = threading.local()


class GpuVideo:
    """Decodes clips of one device; :meth:`problem` says why it cannot (None: it can)."""

    def __init__(self, device: int) -> None:
        self.device = device

    def problem(self) -> str | None:
        return gpu_problem(
            cuda=cuda_usable(self.device), package="PyNvVideoCodec", extra="gpu", device=self.device
        )

    def clips(
        self,
        data: bytes,
        container: InputContainer,
        index: StreamIndex | None,
        ranges: Ranges,
        unit: VideoUnit,
        size: tuple[int, int] | None,
        limits: AVLimits,
    ) -> Clips | None:
        """The clips of ``ranges`` on the GPU, or None (warned once) where the CPU must decode."""
        problem = self.problem()
        if problem is not None:
            warn_once(
                f"video: {problem}",
                f"video_decode_device={self.device} asks for GPU video decoding, but {problem}: "
                "video is decoded on the CPU. Install stoker[gpu] on a machine with CUDA (and use "
                "CUDA only where it was not forked from a process that had used it).",
                stacklevel=4,
            )
            return None
        stream = first_stream(container, "video")
        index = require_frames(index, "video")
        spans = frame_spans(index, ranges, unit)
        width, height = size or (stream.codec_context.width, stream.codec_context.height)
        for span in spans:
            seconds = float((index.pts[span.last] - index.pts[span.first]) * index.time_base)
            limits.check_clip(span.last - span.first + 1, seconds, width, height)
        limits.check_bytes(sum((s.last - s.first + 1) * width * height * 3 for s in spans))
        try:
            clips = self._decode(data, [list(range(s.first, s.last + 1)) for s in spans], size)
        except Exception as e:  # NVDEC lacks the codec, or the file: the CPU decodes it
            warn_once(
                f"video-failed: {type(e).__name__}",
                f"NVDEC could not decode a video ({type(e).__name__}: {e}); such videos are "
                "decoded on the CPU (warned once).",
                stacklevel=4,
            )
            return None
        times = [(index.seconds(s.first), index.end_seconds(s.last)) for s in spans]
        return clips, times

    def _decode(
        self, data: bytes, frames: list[list[int]], size: tuple[int, int] | None
    ) -> list[torch.Tensor]:
        with tempfile.NamedTemporaryFile(suffix=".video", dir=_TMP) as file:
            file.write(data)
            file.flush()
            decoder = self._decoder(file.name)
            wanted = sorted({f for clip in frames for f in clip})
            decoded = decoder.get_batch_frames_by_index(wanted)
            by_index = {
                f: _chw(frame, self.device) for f, frame in zip(wanted, decoded, strict=True)
            }
        clips = [torch.stack([by_index[f] for f in clip]) for clip in frames]
        if size is None:
            return clips
        width, height = size
        return [_resize(clip, height, width) for clip in clips]

    def _decoder(self, path: str) -> Any:
        """This thread's PyNvVideoCodec decoder on this device, pointed at ``path``."""
        nvc = require("PyNvVideoCodec", "GPU video decoding")

        decoders: dict[int, Any] = getattr(_local, "decoders", {})
        _local.decoders = decoders
        decoder = decoders.get(self.device)
        if decoder is not None and hasattr(decoder, "reconfigure_decoder"):
            decoder.reconfigure_decoder(path)
            return decoder
        decoder = nvc.SimpleDecoder(
            path, gpu_id=self.device, use_device_memory=True,
            output_color_type=nvc.OutputColorType.RGB,
        )  # fmt: skip
        decoders[self.device] = decoder
        return decoder


def _chw(frame: Any, device: int) -> torch.Tensor:
    """A decoded frame as a ``(3, H, W)`` uint8 tensor of its own (NVDEC reuses its buffers)."""
    tensor = torch.utils.dlpack.from_dlpack(frame)
    if tensor.dim() == 3 and tensor.shape[-1] == 3:
        tensor = tensor.permute(2, 0, 1)
    return tensor.to(torch.device("cuda", device)).clone()


def _resize(clip: torch.Tensor, height: int, width: int) -> torch.Tensor:
    scaled = torch.nn.functional.interpolate(
        clip.float(), size=(height, width), mode="bilinear", align_corners=False
    )
    return scaled.round_().clamp_(0, 255).to(torch.uint8)
