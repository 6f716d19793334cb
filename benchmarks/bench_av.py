"""Benchmark video clip loading: stoker's AVDecoder vs decoding every frame vs Megatron-Energon.

One dataset is generated once and cached under ``--data-dir``: 480p (854x480) 30 fps H.264
videos of 10 s (``--quick``: 3 s videos), two shards, prepared as ``VidQASample`` (video: mp4,
context: txt). ``--content noise`` (default): moving noise texture, a keyframe every 2 s;
``--content natural``: a pan over a smooth scene with moving objects, x264's default settings
(see ``_av_content.py``). Every configuration loads it through
``get_train_dataset`` + ``get_loader`` with W=2 dataloader workers (batches of 4) in a fresh
subprocess, alternating the tools; each sample becomes one 8-frame 224x224 uint8 clip of frames
spread uniformly over the video:

* ``stoker``: ``get_single_frames_uniform(sample.video, 8, video_out_frame_size=(224, 224))``:
  seeks to the keyframe before each frame and decodes only up to it;
* ``decode-all``: stoker's loader, but the task encoder decodes every frame of the video
  with PyAV (single-threaded like the others; converting only the 8 it keeps): the cost of
  not seeking;
* ``energon``: the same ``get_single_frames_uniform`` call through ``megatron.energon`` 7.4.1.

Measured over ``--batches`` batches after the first: clips/s, and CPU ms per clip of the whole
process tree (loader and workers, user + system; steadier than clips/s on a busy machine), and
the wall time per run.

Usage::

    python benchmarks/bench_av.py --quick      # ~1 minute on 2 cores once the data exists
    python benchmarks/bench_av.py              # full run
    python benchmarks/bench_av.py --phases     # per-clip CPU by phase, in one process
    python benchmarks/bench_av.py --content natural --quick   # camera-like video, x264 defaults
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _av_content import ENCODINGS, make_video
from _data import COMPLETE, has_module, tree_cpu_s

REPO = Path(__file__).resolve().parent.parent
RESULT = "BENCH-RESULT "
TOOLS = ("stoker", "decode-all", "energon")
FRAMES, SIZE, BATCH, WORKERS = 8, (224, 224), 4, 2


# --- data ----------------------------------------------------------------------------------------


def ensure_videos(data_dir: Path, videos: int, seconds: float, content: str = "noise") -> Path:
    """Two prepared shards of ``videos`` mp4 + txt samples of ``content``, generated once."""
    kind = "" if content == "noise" else f"{content}-"  # the noise data keeps its old name
    path = data_dir / f"videos-{kind}{videos}x{seconds:g}s-480p"
    if (path / COMPLETE).exists():
        return path
    from stoker.format.dataset_config import make_dataset_yaml
    from stoker.format.prepare import prepare_dataset

    print(f"generating {path} ...", flush=True)
    path.mkdir(parents=True, exist_ok=True)
    for s in range(2):
        keys = range(s * videos // 2, (s + 1) * videos // 2)
        samples = [
            (f"v{i:04d}", {"mp4": make_video(content, seconds, i), "txt": b"what happens?"})
            for i in keys
        ]
        with tarfile.open(path / f"videos_{s}.tar", "w") as tar:
            for key, parts in samples:
                for part, data in parts.items():
                    info = tarfile.TarInfo(f"{key}.{part}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    prepare_dataset(
        str(path),
        split_ratio=[("train", 1.0)],
        dataset_yaml=make_dataset_yaml("VidQASample", {"video": "mp4", "context": "txt"}),
        overwrite=True,
    )
    meta = {"videos": videos, "seconds": seconds, "content": content}
    (path / COMPLETE).write_text(json.dumps(meta))
    return path


# --- child side: one configuration in its own process --------------------------------------------


def decode_all(video: Any) -> Any:
    """Decode every frame of ``video`` (an AVDecoder) and keep 8 evenly spread, as 224 px RGB."""
    import av
    import numpy as np
    import torch

    with av.open(io.BytesIO(video.stream.getvalue())) as container:
        container.streams.video[0].thread_type = "NONE"  # as stoker and Energon decode
        frames = list(container.decode(video=0))
    keep = np.linspace(0, len(frames) - 1, FRAMES).round().astype(int)
    arrays = [frames[i].to_ndarray(format="rgb24", width=SIZE[0], height=SIZE[1]) for i in keep]
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)


def open_loader(tool: str, path: Path) -> Any:
    if tool == "energon":
        from megatron import energon as lib
        from megatron.energon.av import get_single_frames_uniform
    else:
        import stoker as lib
        from stoker import get_single_frames_uniform

    class ClipEncoder(lib.DefaultTaskEncoder):  # type: ignore[misc, name-defined]
        def encode_sample(self, sample: Any) -> Any:
            if tool == "decode-all":
                clip = decode_all(sample.video)
            else:
                clip = get_single_frames_uniform(sample.video, FRAMES, video_out_frame_size=SIZE)
            return type(sample).derive_from(sample, video=clip, context=sample.context)

    dataset = lib.get_train_dataset(
        str(path),
        worker_config=lib.WorkerConfig(rank=0, world_size=1, num_workers=WORKERS),
        batch_size=BATCH,
        shuffle_buffer_size=8,
        max_samples_per_sequence=8,
        task_encoder=ClipEncoder(),
    )
    return lib.get_loader(dataset)


def child_main(spec: dict[str, Any]) -> None:
    import torch

    source = None
    if spec["tool"] != "energon":
        import stoker
        import stoker.api  # imports outside the timing

        source = str(Path(stoker.__file__).parent)
    start = time.perf_counter()
    loader = iter(open_loader(spec["tool"], Path(spec["path"])))
    batch = next(loader)
    first = time.perf_counter() - start
    start, cpu = time.perf_counter(), tree_cpu_s()
    clips = 0
    for _ in range(spec["batches"]):
        batch = next(loader)
        assert batch.video.shape[1:] == (FRAMES, 3, SIZE[1], SIZE[0]), batch.video.shape
        assert batch.video.dtype == torch.uint8
        clips += batch.video.shape[0]
    seconds, cpu = time.perf_counter() - start, tree_cpu_s() - cpu
    result = {"clips_per_s": clips / seconds, "cpu_ms_per_clip": 1e3 * cpu / clips, "src": source}
    print(RESULT + json.dumps({**result, "first_batch_s": first}), flush=True)
    os._exit(0)  # skip loader teardown: not part of the measurement


# --- parent side ---------------------------------------------------------------------------------


def run_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    # The stoker sources first: the child must not import an installed copy instead.
    path = os.pathsep.join([spec["src"], str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": path}
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {spec} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return {**json.loads(lines[-1][len(RESULT) :]), "wall_s": time.perf_counter() - start}


def print_table(results: dict[str, list[dict[str, Any]]]) -> None:
    def med(tool: str, key: str) -> float:
        return statistics.median(r[key] for r in results[tool])

    print(
        f"{'tool':<12} {'runs':>4} {'clips/s':>9} {'CPU ms/clip':>12} {'first batch s':>14} "
        f"{'wall s':>7}"
    )
    for tool, runs in results.items():
        print(
            f"{tool:<12} {len(runs):>4} {med(tool, 'clips_per_s'):>9.1f} "
            f"{med(tool, 'cpu_ms_per_clip'):>12.1f} {med(tool, 'first_batch_s'):>14.2f} "
            f"{med(tool, 'wall_s'):>7.1f}"
        )
    if "stoker" not in results:
        return
    for other in ("decode-all", "energon", "stoker-base"):
        if other in results:
            speed = med("stoker", "clips_per_s") / med(other, "clips_per_s")
            cpu = med(other, "cpu_ms_per_clip") / med("stoker", "cpu_ms_per_clip")
            print(f"stoker / {other}: {speed:.2f}x clips/s, {cpu:.2f}x clips per CPU second")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--quick", action="store_true", help="6 videos of 3 s, 3 batches, 1 run")
    parser.add_argument(
        "--content",
        choices=sorted(ENCODINGS),
        default="noise",
        help="the videos' pictures and x264 settings (see _av_content.py; default noise)",
    )
    parser.add_argument("--videos", type=int, help="videos in the dataset (32)")
    parser.add_argument("--batches", type=int, help="timed batches after the first (20)")
    parser.add_argument("--repeats", type=int, help="runs per tool (3)")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument(
        "--base-src",
        type=Path,
        help="also run 'stoker-base': stoker imported from this src/ folder (an A/B of versions)",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="instead: where one clip's CPU time goes, in one process (see _av_phases.py)",
    )
    parser.add_argument("--phase-videos", type=int, default=8, help="videos for --phases (8)")
    parser.add_argument("--phase-repeats", type=int, default=3, help="runs per video (3)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    tools = [t for t in args.tools.split(",") if t]
    if "energon" in tools and not has_module("megatron.energon"):
        print("megatron-energon is not installed: skipping it", flush=True)
        tools.remove("energon")
    seconds = 3.0 if args.quick else 10.0
    path = ensure_videos(
        args.data_dir, args.videos or (6 if args.quick else 32), seconds, args.content
    )
    if args.phases:
        import _av_phases

        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {path.name}", flush=True)
        _av_phases.run(path, args.phase_videos, args.phase_repeats)
        return 0
    batches = args.batches or (3 if args.quick else 20)
    repeats = args.repeats or (1 if args.quick else 3)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {path.name} "
        f"(x264 {ENCODINGS[args.content] or 'defaults'}); W={WORKERS}, "
        f"{batches} timed batches of {BATCH} clips of {FRAMES}x{SIZE[0]}x{SIZE[1]}",
        flush=True,
    )
    if args.base_src:
        tools.append("stoker-base")
    sources = {"stoker-base": str(args.base_src)} if args.base_src else {}
    results: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for _ in range(repeats):
        for tool in tools:
            spec = {"tool": tool, "path": str(path), "batches": batches}
            spec["src"] = sources.get(tool, str(REPO / "src"))
            result = run_child(spec, args.timeout)
            print(
                f"  {tool:<12} {result['clips_per_s']:8.1f} clips/s "
                f"{result['cpu_ms_per_clip']:8.1f} CPU ms/clip"
                + (f"  (stoker from {result['src']})" if result["src"] else ""),
                flush=True,
            )
            results[tool].append(result)
    print()
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
