"""GPU-machine check (issue 34): images/s and clips/s with CPU and GPU decode, DALI where it is
importable, and stoker's CPU scaling with the worker count. Writes ``gpu_table.md`` and
``gpu_results.json`` into ``--out``.

* images: photo-like JPEGs (~50 KB, 256-512 px; ``_data.py``'s "photos" dataset), batches of
  64 pad-stacked, shuffled (buffer 100). CPU decode (``torchrgb8``) at each ``--workers`` W, the
  batch then copied to the GPU where there is one (what training does with it); GPU decode
  (``nvimgcodecrgb8``: workers send the JPEG bytes, the main process decodes each batch with
  nvImageCodec) at W=2 and 4; nvImageCodec's batched decode alone on batches held in memory
  (its ceiling); DALI's ``fn.decoders.image(device="mixed")`` on the same JPEGs fed from memory,
  where ``nvidia.dali`` imports. Each GPU batch is compared with the CPU decode of the same
  images: the largest difference in levels is reported.
* scaling: CPU decode at each ``--scaling`` W; efficiency = rate / (W x rate at W=1).
* video: h264 clips (640x360, 96 frames, keyframe every 24) made with PyAV; ``AVDecoder``'s
  ``get_clips`` of two 16-frame clips per video, on the CPU in W processes, and on the GPU
  (``AVDecoder(device=0)``) in the main process.

The figures are rates over a fixed amount of work after a warm-up batch; on a shared machine,
read them as medians of ``--repeats`` runs. ``--cpu-only --quick`` runs the CPU parts on a tiny
dataset in seconds (the test suite runs it so that this script does not rot).

Usage::

    python benchmarks/bench_gpu.py --out /tmp/gpu [--quick] [--cpu-only] [--parts images,video]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import DatasetSpec, ensure_dataset, prepare_captioning

BATCH = 64


def has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def sync() -> None:
    if cuda():
        import torch

        torch.cuda.synchronize()


def loader(path: Path, mode: str, workers: int) -> Any:
    import stoker

    class Encoder(stoker.DefaultTaskEncoder):  # type: ignore[type-arg]
        decoder = stoker.SampleDecoder(image_decode=mode)  # type: ignore[arg-type]

    dataset = stoker.get_train_dataset(
        str(path),
        worker_config=stoker.WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=BATCH,
        shuffle_buffer_size=100,
        max_samples_per_sequence=100,
        task_encoder=Encoder(),
    )
    return stoker.get_loader(dataset, pin_memory=cuda() and mode.startswith("torch"))


def images_per_s(path: Path, mode: str, workers: int, batches: int) -> float:
    """Images/s of a loader in ``mode`` over ``batches`` batches after the first, the batches on
    the GPU where there is one."""
    on_gpu = cuda()
    it = iter(loader(path, mode, workers))
    next(it)
    start = time.perf_counter()
    for _ in range(batches):
        batch = next(it)
        if on_gpu and batch.image.device.type == "cpu":
            batch.image.to("cuda", non_blocking=True)
    sync()
    return batches * BATCH / (time.perf_counter() - start)


def median_rate(repeats: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeats))


def compressed_batches(path: Path, count: int) -> list[Any]:
    """``count`` batches of the dataset's JPEGs as the workers send them (for the ceilings)."""
    from stoker.media.gpu_images import CompressedImages
    from stoker.pipeline.decode import SampleDecoder

    decoder = SampleDecoder(image_decode="nvimgcodecrgb8")
    datas = [data for _, data in zip(range(count * BATCH), jpegs(path), strict=False)]
    batches = []
    for b in range(count):
        items = [decoder.decode_part("k", "jpg", d) for d in datas[b * BATCH : (b + 1) * BATCH]]
        batches.append(CompressedImages(items, "nvimgcodecrgb8", 0))
    return batches


def jpegs(path: Path) -> Any:
    import tarfile

    for shard in sorted(path.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                if member.name.endswith(".jpg"):
                    file = tar.extractfile(member)
                    if file is not None:
                        yield file.read()


def gpu_ceiling(path: Path, batches: int) -> tuple[float, int]:
    """(images/s of nvImageCodec's batched decode alone, max level difference to the CPU)."""
    from stoker.media.gpu_image_decoder import decode_on_gpu

    held = compressed_batches(path, min(batches, 8))
    decode_on_gpu(held[0])
    sync()
    start = time.perf_counter()
    for i in range(batches):
        decode_on_gpu(held[i % len(held)])
    sync()
    rate = batches * BATCH / (time.perf_counter() - start)
    diff = max(
        int((decode_on_gpu(b).cpu().int() - b.cpu_tensor().int()).abs().max()) for b in held[:2]
    )
    return rate, diff


def dali_rate(path: Path, batches: int) -> float:
    """Images/s of DALI's mixed JPEG decoder on the same JPEGs fed from memory."""
    import numpy as np
    from nvidia.dali import fn, pipeline_def

    held = [np.frombuffer(d, np.uint8) for _, d in zip(range(8 * BATCH), jpegs(path), strict=False)]
    state = {"i": 0}

    def feed() -> list[Any]:
        start = state["i"] % (len(held) - BATCH + 1)
        state["i"] += BATCH
        return held[start : start + BATCH]

    @pipeline_def(batch_size=BATCH, num_threads=4, device_id=0)  # type: ignore[misc]
    def pipe() -> Any:
        return fn.decoders.image(fn.external_source(source=feed), device="mixed")

    p = pipe()
    p.build()
    p.run()
    start = time.perf_counter()
    for _ in range(batches):
        p.run()
    return batches * BATCH / (time.perf_counter() - start)


def make_videos(count: int, size: tuple[int, int], frames: int) -> list[bytes]:
    import io

    import av
    import numpy as np

    rng = np.random.default_rng(0)
    videos = []
    for _ in range(count):
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            stream = out.add_stream("libx264", rate=30, options={"g": "24", "preset": "veryfast"})
            stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
            texture = rng.integers(0, 256, (size[1], size[0] * 2, 3), dtype=np.uint8)
            for k in range(frames):
                shift = (4 * k) % size[0]
                image = np.ascontiguousarray(texture[:, shift : shift + size[0]])
                frame = av.VideoFrame.from_ndarray(image, format="rgb24")
                frame.pts = k
                out.mux(stream.encode(frame))
            out.mux(stream.encode(None))
        videos.append(buf.getvalue())
    return videos


RANGES = [(8, 23), (50, 65)]


def _cpu_clips(data: bytes) -> int:
    from stoker.media.av_decoder import AVDecoder

    clips, _ = AVDecoder(data).get_video_clips(RANGES, video_unit="frames")
    return len(clips)


def cpu_clips_per_s(videos: list[bytes], workers: int) -> float:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        pool.map(_cpu_clips, videos[:workers])  # warm-up
        start = time.perf_counter()
        clips = sum(pool.map(_cpu_clips, videos, chunksize=1))
    return clips / (time.perf_counter() - start)


def gpu_clips_per_s(videos: list[bytes]) -> tuple[float, float]:
    """(clips/s, mean level difference to the CPU decode of the first video's clips)."""
    from stoker.media.av_decoder import AVDecoder

    first, _ = AVDecoder(videos[0], device=0).get_video_clips(RANGES, video_unit="frames")
    if first[0].device.type != "cuda":
        raise RuntimeError("the GPU video decode fell back to the CPU (see its warning)")
    sync()
    start = time.perf_counter()
    clips = 0
    for data in videos:
        got, _ = AVDecoder(data, device=0).get_video_clips(RANGES, video_unit="frames")
        clips += len(got)
    sync()
    rate = clips / (time.perf_counter() - start)
    cpu, _ = AVDecoder(videos[0]).get_video_clips(RANGES, video_unit="frames")
    diff = statistics.mean(
        float((g.cpu().float() - c.float()).abs().mean()) for g, c in zip(first, cpu, strict=True)
    )
    return rate, diff


def run(args: argparse.Namespace) -> dict[str, Any]:
    parts = set(args.parts.split(","))
    gpu = cuda() and not args.cpu_only
    results: dict[str, Any] = {"cuda": gpu, "errors": {}}
    spec = DatasetSpec("photos", 2, 64) if args.quick else DatasetSpec("photos", 16, 500)
    dataset = ensure_dataset(Path(args.data_dir), spec)
    prepare_captioning(dataset)
    path = dataset.path
    batches = 3 if args.quick else args.batches

    def attempt(name: str, fn: Callable[[], Any]) -> Any:
        try:
            value = fn()
        except Exception as e:  # a part that cannot run is reported, the rest goes on
            results["errors"][name] = f"{type(e).__name__}: {e}"
            print(f"{name}: failed: {e}", flush=True)
            return None
        print(f"{name}: {value}", flush=True)
        return value

    workers = [int(w) for w in args.workers.split(",")]
    if "images" in parts:
        results["cpu_images"] = {
            w: attempt(f"cpu images W={w}", lambda w=w: median_rate(
                args.repeats, lambda: images_per_s(path, "torchrgb8", w, batches)))
            for w in workers
        }  # fmt: skip
        if gpu and has("nvidia.nvimgcodec"):
            results["gpu_images"] = {
                w: attempt(f"gpu images W={w}", lambda w=w: median_rate(
                    args.repeats, lambda: images_per_s(path, "nvimgcodecrgb8", w, batches)))
                for w in (2, 4)
            }  # fmt: skip
            results["gpu_ceiling"] = attempt("gpu decode alone", lambda: gpu_ceiling(path, 40))
        if gpu and has("nvidia.dali"):
            results["dali"] = attempt("dali", lambda: dali_rate(path, 40))
    if "scaling" in parts:
        results["scaling"] = {
            w: attempt(f"scaling W={w}", lambda w=w: images_per_s(path, "torchrgb8", w, batches))
            for w in [int(w) for w in args.scaling.split(",")]
        }
    if "video" in parts and has("av"):
        size, frames, count = ((160, 96), 72, 4) if args.quick else ((640, 360), 96, 48)
        videos = make_videos(count, size, frames)
        results["cpu_clips"] = {
            w: attempt(f"cpu clips W={w}", lambda w=w: cpu_clips_per_s(videos, w)) for w in workers
        }
        if gpu and has("PyNvVideoCodec"):
            results["gpu_clips"] = attempt("gpu clips", lambda: gpu_clips_per_s(videos))
    return results


def table(results: dict[str, Any], machine: str) -> str:
    """The Markdown table of ``results``."""

    def fmt(value: Any) -> str:
        return "n/a" if value is None else f"{value:,.0f}"

    lines = [f"Machine: {machine}", "", "| measure | W | per second | note |", "|---|---|---|---|"]
    cpu = {w: v for w, v in (results.get("cpu_images") or {}).items() if v is not None}
    for w, v in cpu.items():
        lines.append(f"| images, CPU decode (torchrgb8) | {w} | {fmt(v)} | |")
    best_cpu = max(cpu.values(), default=None)
    for w, v in (results.get("gpu_images") or {}).items():
        ratio = "" if best_cpu is None or v is None else f"{v / best_cpu:.2f}x best CPU"
        lines.append(f"| images, GPU decode (nvimgcodecrgb8) | {w} | {fmt(v)} | {ratio} |")
    if results.get("gpu_ceiling"):
        rate, diff = results["gpu_ceiling"]
        lines.append(
            f"| images, nvImageCodec decode alone | - | {fmt(rate)} | max diff {diff} levels |"
        )
    if "dali" in results:
        lines.append(f"| images, DALI mixed decoder (from memory) | - | {fmt(results['dali'])} | |")
    else:
        lines.append("| images, DALI | - | n/a | nvidia.dali not importable here |")
    scaling = {w: v for w, v in (results.get("scaling") or {}).items() if v is not None}
    base = scaling.get(1)
    for w, v in scaling.items():
        eff = "" if not base else f"{v / (w * base):.2f} of linear"
        lines.append(f"| scaling, CPU decode | {w} | {fmt(v)} | {eff} |")
    for w, v in (results.get("cpu_clips") or {}).items():
        lines.append(f"| clips, CPU decode (PyAV) | {w} | {fmt(v)} | |")
    if results.get("gpu_clips"):
        rate, diff = results["gpu_clips"]
        lines.append(
            f"| clips, GPU decode (NVDEC) | main | {fmt(rate)} | mean diff {diff:.2f} levels |"
        )
    for name, error in results.get("errors", {}).items():
        lines.append(f"| {name} | - | failed | {error[:120]} |")
    return "\n".join(lines) + "\n"


def machine() -> str:
    import os

    name = "no GPU"
    if cuda():
        import torch

        name = torch.cuda.get_device_name(0)
    return f"{name}, {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--data-dir", default="bench-data")
    parser.add_argument("--parts", default="images,scaling,video")
    parser.add_argument("--workers", default="2,4,8,14")
    parser.add_argument("--scaling", default="1,2,4,8,14")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="tiny data, few batches")
    parser.add_argument("--cpu-only", action="store_true", help="skip the GPU parts")
    args = parser.parse_args()
    results = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_results.json").write_text(json.dumps(results, indent=1, default=str))
    text = table(results, machine())
    (out / "gpu_table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
