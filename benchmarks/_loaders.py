"""The loaders that ``bench_loader.py`` compares, each run in a child process.

stoker and Megatron-Energon through the same calls (``get_train_dataset`` + ``get_loader``), and
plain WebDataset in a torch ``DataLoader``; all shuffle (buffer 100), decode images to uint8 or
float CHW tensors, and pad-stack batches of 32.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _data import tree_cpu_s

BATCH = 32
SHUFFLE_BUFFER = 100
MAX_SAMPLES_PER_SEQUENCE = 100
LOADERS = ("stoker", "stoker-nostats", "energon", "webdataset")
#: stoker from another source tree (``bench_loader.py --baseline-src``): before/after in one run.
BASELINE = "stoker-base"
MODES = {"uint8": "torchrgb8", "float": "torchrgb"}


@dataclass(frozen=True)
class Config:
    tool: str
    workers: int
    dtype: str  # "uint8" or "float"

    @property
    def label(self) -> str:
        return f"{self.tool} W={self.workers} {self.dtype}"


def import_tool(tool: str) -> None:
    """Import what ``tool`` needs, so that the timed part does not include imports."""
    import torch  # noqa: F401

    if tool.startswith("stoker"):
        # ``import stoker`` is lazy (the CLI starts without torch); what a training script
        # imports is the API, as ``import megatron.energon`` imports all of Energon.
        from stoker import get_loader, get_train_dataset  # noqa: F401
    elif tool == "energon":
        import megatron.energon  # noqa: F401
    elif tool == "webdataset":
        import webdataset  # noqa: F401


def open_loader(config: Config, path: Path) -> Any:
    """The loader of ``config`` (an iterable of batches)."""
    mode = MODES[config.dtype]
    if config.tool == "webdataset":
        return webdataset_loader(path, config.workers, mode)
    kwargs: dict[str, Any] = {}
    if config.tool.startswith("stoker"):
        import stoker as lib

        if config.tool == "stoker-nostats":  # the same loader with Loader.stats() off
            kwargs["options"] = lib.LoaderOptions(stats=False)
    else:
        from megatron import energon as lib

    class Encoder(lib.DefaultTaskEncoder):  # type: ignore[misc, name-defined]
        decoder = lib.SampleDecoder(image_decode=mode)

    dataset = lib.get_train_dataset(
        str(path),
        worker_config=lib.WorkerConfig(rank=0, world_size=1, num_workers=config.workers),
        batch_size=BATCH,
        shuffle_buffer_size=SHUFFLE_BUFFER,
        max_samples_per_sequence=MAX_SAMPLES_PER_SEQUENCE,
        task_encoder=Encoder(),
    )
    return lib.get_loader(dataset, **kwargs)


def webdataset_loader(path: Path, workers: int, mode: str) -> Any:
    """Plain WebDataset: shuffled shards and samples, decoded, pad-stacked, in a DataLoader."""
    import torch.utils.data
    import webdataset as wds

    urls = sorted(str(p) for p in path.glob("*.tar"))
    pipeline = (
        wds.WebDataset(urls, shardshuffle=100, repeat=True)
        .shuffle(SHUFFLE_BUFFER)
        .decode(mode)
        .to_tuple("jpg", "txt")
        .batched(BATCH, collation_fn=pad_stack_collate, partial=False)
    )
    return torch.utils.data.DataLoader(pipeline, batch_size=None, num_workers=workers)


def pad_stack_collate(samples: list[tuple[Any, str]]) -> tuple[Any, list[str]]:
    """(images zero-padded to the largest and stacked, captions), as a user would write it."""
    images = [image for image, _ in samples]
    shape = [max(image.shape[d] for image in images) for d in range(images[0].ndim)]
    out = images[0].new_zeros((len(images), *shape))
    for i, image in enumerate(images):
        out[(i, *(slice(0, s) for s in image.shape))] = image
    return out, [caption for _, caption in samples]


def batch_images(batch: Any) -> Any:
    return batch[0] if isinstance(batch, (tuple, list)) else batch.image  # DataLoader: a list


def check_batch(batch: Any, config: Config) -> str:
    """A batch of the expected shape and dtype (a fast wrong benchmark is worthless)."""
    import torch

    images = batch_images(batch)
    dtype = torch.uint8 if config.dtype == "uint8" else torch.float32
    if images.dtype != dtype or images.ndim != 4 or images.shape[:2] != (BATCH, 3):
        raise RuntimeError(f"{config.label}: unexpected batch {images.dtype} {tuple(images.shape)}")
    return f"{images.dtype} {tuple(images.shape)}"


def run_loader(config: Config, path: Path, batches: int) -> dict[str, Any]:
    import_tool(config.tool)
    start = time.perf_counter()
    loader = open_loader(config, path)
    batch_iter = iter(loader)
    first = next(batch_iter)
    first_s = time.perf_counter() - start
    shape = check_batch(first, config)
    del first  # a training loop lets go of each batch: so does every tool here
    start, cpu, main_cpu = time.perf_counter(), tree_cpu_s(), tree_cpu_s(children=False)
    for _ in range(batches):
        batch = next(batch_iter)
    seconds, cpu = time.perf_counter() - start, tree_cpu_s() - cpu
    main_cpu = tree_cpu_s(children=False) - main_cpu
    check_batch(batch, config)
    result = {
        "samples_per_s": batches * BATCH / seconds,
        "cpu_ms_per_sample": 1000 * cpu / (batches * BATCH),
        # the training process's share (at W=0, all of it; at W>0, receiving the batches)
        "main_cpu_ms_per_sample": 1000 * main_cpu / (batches * BATCH),
        "first_batch_s": first_s,
        "batch": shape,
    }
    close = getattr(loader, "close", None)
    del batch_iter, batch
    if close is not None:
        close()
    return result


def profile_stoker(path: Path, batches: int, top: int) -> dict[str, Any]:
    """cProfile of stoker (W=0, uint8) over ``batches`` batches: top functions, two orders."""
    import cProfile
    import io
    import pstats

    config = Config("stoker", 0, "uint8")
    import_tool("stoker")
    profiler = cProfile.Profile()
    profiler.enable()
    loader = open_loader(config, path)
    count = 0
    for _ in zip(range(batches), loader, strict=False):
        count += 1
    profiler.disable()
    text = {}
    for order in ("cumulative", "tottime"):
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats(order).print_stats(top)
        text[order] = stream.getvalue()
    loader.close()
    return {"batches": count, "stats": text}
