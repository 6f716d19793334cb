"""The physical limit: read each shard with plain Python and decode every JPEG, nothing else.

No shuffle, no batching; one process, or W processes over disjoint shards. ``bare`` decodes with
simplejpeg (as stoker does), ``bare-pil`` with Pillow (as Energon and WebDataset do).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from _loaders import BATCH, Config, import_tool

BARE = ("bare", "bare-pil")


def tar_members(path: str) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each member of an uncompressed tar, with plain file reads."""
    with open(path, "rb") as f:
        while True:
            header = f.read(512)
            if len(header) < 512 or header[0] == 0:
                return
            name = header[:100].rstrip(b"\0").decode()
            size = int(header[124:136].strip(b"\0 ") or b"0", 8)
            data = f.read(size)
            f.read(-size % 512)
            yield name, data


def bare_decoder(tool: str, dtype: str) -> Callable[[bytes], Any]:
    """JPEG bytes -> CHW tensor (uint8, or float32 in [0, 1] made as stoker makes it)."""
    import io

    import numpy as np
    import torch

    if tool == "bare":
        import simplejpeg

        def pixels(data: bytes) -> Any:
            return simplejpeg.decode_jpeg(data, colorspace="RGB")
    else:
        from PIL import Image

        def pixels(data: bytes) -> Any:
            with Image.open(io.BytesIO(data)) as img:
                return np.array(img.convert("RGB"))

    def decode(data: bytes) -> Any:
        arr = pixels(data)
        if dtype == "uint8":
            return torch.from_numpy(arr).permute(2, 0, 1)
        out = np.ascontiguousarray(arr.transpose(2, 0, 1), dtype=np.float32)
        return torch.from_numpy(np.divide(out, 255.0, out=out))

    return decode


def bare_samples(shards: list[str], decode: Callable[[bytes], Any]) -> Iterator[Any]:
    for shard in shards:
        for name, data in tar_members(shard):
            if name.endswith(".jpg"):
                yield decode(data)
            elif name.endswith(".txt"):
                data.decode()


def bare_worker(
    shards: list[str], config: Config, warmup: int, timed: int, barrier: Any, queue: Any
) -> None:
    """Decode ``warmup`` samples, wait for the others, then time ``timed`` samples."""
    samples = bare_samples(shards, bare_decoder(config.tool, config.dtype))
    for _ in zip(range(warmup), samples, strict=False):
        pass
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    done = sum(1 for _ in zip(range(timed), samples, strict=False))
    queue.put((start, time.perf_counter(), done, time.process_time() - cpu))


def run_bare(config: Config, path: Path, batches: int) -> dict[str, Any]:
    """The bare loop in ``max(W, 1)`` processes over disjoint halves of the shards."""
    import multiprocessing

    import_tool("bare")
    shards = sorted(str(p) for p in path.glob("*.tar"))
    procs = max(config.workers, 1)
    if len(shards) < procs:
        raise RuntimeError(f"{config.label}: {len(shards)} shards for {procs} processes")
    warmup, timed = -(-BATCH // procs), batches * BATCH // procs
    start = time.perf_counter()
    if config.workers == 0:
        samples = bare_samples(shards, bare_decoder(config.tool, config.dtype))
        for _ in zip(range(warmup), samples, strict=False):
            pass
        first_s = time.perf_counter() - start
        begin, cpu = time.perf_counter(), time.process_time()
        done = sum(1 for _ in zip(range(timed), samples, strict=False))
        spans = [(begin, time.perf_counter(), done, time.process_time() - cpu)]
    else:
        context = multiprocessing.get_context("fork")
        barrier, queue = context.Barrier(procs + 1), context.Queue()
        args = [(shards[p::procs], config, warmup, timed, barrier, queue) for p in range(procs)]
        workers = [context.Process(target=bare_worker, args=a) for a in args]
        for w in workers:
            w.start()
        barrier.wait()
        first_s = time.perf_counter() - start
        spans = [queue.get() for _ in workers]
        for w in workers:
            w.join()
    done = sum(n for _, _, n, _ in spans)
    if done < batches * BATCH - procs:
        raise RuntimeError(f"{config.label}: the shards hold too few samples for {batches=}")
    seconds = max(end for _, end, _, _ in spans) - min(begin for begin, _, _, _ in spans)
    return {
        "samples_per_s": done / seconds,
        "cpu_ms_per_sample": 1000 * sum(cpu for *_, cpu in spans) / done,
        "first_batch_s": first_s,
        "batch": "no batching",
    }
