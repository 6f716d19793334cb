"""Small-text workloads for ``bench_text.py``: the data, the loaders and the bare loops.

Two workloads:

* ``jsonl``: one indexed JSONL file of 20 000 lines of ~500 bytes (``{"id": i, "text": ...}``),
  loaded as crude samples and batched by 256 with the default task encoder (dicts of lists);
* ``tiny``: 10^5 one-member samples (``.txt``, ~20 bytes) in 10^4 tar shards of 10, prepared as
  ``TextSample`` (``text: txt``), batched by 32.

Every loader shuffles (buffer 100, 100 samples per shard sequence) and repeats; the consumer only
iterates (an idle consumer). ``bare`` is the physical limit: plain Python over the same files,
one process per worker over disjoint halves, no shuffle, no batching.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from _data import Dataset, DatasetSpec, ensure_dataset, tree_cpu_s

WORKLOADS = {"jsonl": 256, "tiny": 32}  # workload -> batch size
SHUFFLE_BUFFER = 100
MAX_SAMPLES_PER_SEQUENCE = 100
JSONL_LINES = 20_000
TINY = DatasetSpec("tiny", 10_000, 10)
WORDS = "the quick brown fox jumps over a lazy dog while stoker feeds many hungry accelerators"


def ensure_jsonl(data_dir: Path, lines: int = JSONL_LINES) -> Path:
    """``texts-<lines>.jsonl`` (+ ``.idx``) under ``data_dir``, ~500 bytes a line."""
    from stoker.format.jsonl import prepare_jsonl

    path = data_dir / f"texts-{lines}.jsonl"
    if not Path(str(path) + ".idx").exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        words = WORDS.split()
        rng = np.random.default_rng(0)
        rows = []
        for i in range(lines):
            text = " ".join(words[j] for j in rng.integers(0, len(words), 90))[:470]
            rows.append(json.dumps({"id": i, "text": text}) + "\n")
        path.write_text("".join(rows))
        prepare_jsonl(str(path))
    return path


def ensure_tiny(data_dir: Path) -> Dataset:
    """10^4 shards x 10 tiny ``.txt`` samples, prepared as ``TextSample`` (train split only)."""
    dataset = ensure_dataset(data_dir, TINY)
    if not (dataset.path / ".nv-meta" / "split.yaml").exists():
        from stoker.format.dataset_config import make_dataset_yaml
        from stoker.format.prepare import prepare_dataset

        print(f"preparing {dataset.path} ...", flush=True)
        prepare_dataset(
            str(dataset.path),
            split_ratio=[("train", 1.0)],
            dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
            overwrite=True,
        )
    return dataset


# --- loaders -------------------------------------------------------------------------------------


def open_loader(tool: str, workload: str, workers: int, path: Path) -> Any:
    batch = WORKLOADS[workload]
    if tool == "webdataset":
        return webdataset_loader(path, workers, batch)
    if tool == "stoker":
        import stoker as lib
    else:
        from megatron import energon as lib
    task_encoder = None
    if workload == "jsonl":  # crude samples need a cooker (Energon raises without one)

        class Encoder(lib.DefaultTaskEncoder):  # type: ignore[misc, name-defined]
            cookers = [lib.Cooker(lib.stateless(text_cooker(lib)))]  # noqa: RUF012

        task_encoder = Encoder()
    dataset = lib.get_train_dataset(
        str(path),
        worker_config=lib.WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=batch,
        shuffle_buffer_size=SHUFFLE_BUFFER,
        max_samples_per_sequence=MAX_SAMPLES_PER_SEQUENCE,
        **({"task_encoder": task_encoder} if task_encoder is not None else {}),
    )
    return lib.get_loader(dataset)


def text_cooker(lib: Any) -> Any:
    """The cooker of a JSONL line's ``text`` as ``lib``'s ``TextSample``: the same code for
    stoker and Energon, with the library's names bound once, as a user's module binds them
    (looking the library up per sample, with an ``import``, cost ~12 % of stoker's
    instructions per sample)."""
    text_sample, sample_keys = lib.TextSample, lib.basic_sample_keys

    def cook_text(sample: dict[str, Any]) -> Any:
        return text_sample(**sample_keys(sample), text=sample["json"]["text"])

    return cook_text


def webdataset_loader(path: Path, workers: int, batch: int) -> Any:
    """Plain WebDataset over the tiny shards: shuffled shards and samples, text batched as lists."""
    import torch.utils.data
    import webdataset as wds

    urls = sorted(str(p) for p in path.glob("*.tar"))
    pipeline = (
        wds.WebDataset(urls, shardshuffle=100, repeat=True)
        .shuffle(SHUFFLE_BUFFER)
        .decode()
        .to_tuple("__key__", "txt")
        .batched(
            batch,
            collation_fn=lambda rows: [list(col) for col in zip(*rows, strict=True)],
            partial=False,
        )
    )
    return torch.utils.data.DataLoader(pipeline, batch_size=None, num_workers=workers)


def batch_texts(batch: Any) -> list[Any]:
    """The texts of a batch, whatever the tool returns (a check that batches are real)."""
    if isinstance(batch, list):
        return list(batch[1])
    return list(batch.text)


def run_loader(
    tool: str, workload: str, workers: int, path: Path, batches: int, warmup: int = 0
) -> dict[str, Any]:
    """Time ``batches`` batches after the first and ``warmup`` more (untimed). With workers, the
    first batches come while the workers fill their prefetch queues: what they make ahead (a few
    percent of a 60 000-sample run at W=2) is paid for in the timed batches unless a warm-up
    lets the queues fill first."""
    import torch  # noqa: F401  (imports are not timed)

    if tool == "stoker":
        from stoker import get_loader, get_train_dataset  # noqa: F401
    elif tool == "energon":
        import megatron.energon  # noqa: F401
    size = WORKLOADS[workload]
    start = time.perf_counter()
    loader = open_loader(tool, workload, workers, path)
    batch_iter = iter(loader)
    first = next(batch_iter)
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        next(batch_iter)
    cpu_before, main_before = tree_cpu_s(), tree_cpu_s(children=False)
    start = time.perf_counter()
    for _ in range(batches):
        batch = next(batch_iter)
    seconds = time.perf_counter() - start
    cpu_us = (tree_cpu_s() - cpu_before) / (batches * size) * 1e6
    main_us = (tree_cpu_s(children=False) - main_before) / batches * 1e6
    texts = batch_texts(batch)
    if len(texts) != size or len(batch_texts(first)) != size:
        raise RuntimeError(f"{tool} {workload}: batch of {len(texts)} texts, not {size}")
    skipped = loader.skipped().by_reason if tool == "stoker" else None
    if skipped:  # a run that skips samples measures something else
        raise RuntimeError(f"{tool} {workload}: samples skipped: {skipped}")
    close = getattr(loader, "close", None)
    del batch_iter, first, batch
    if close is not None:
        close()
    return {
        "samples_per_s": batches * size / seconds, "first_batch_s": first_s, "cpu_us": cpu_us,
        "main_cpu_us_per_batch": main_us, "main_core_share": main_us * batches / 1e6 / seconds,
    }  # fmt: skip


# --- bare loops ----------------------------------------------------------------------------------


def bare_jsonl(path: str, part: int, parts: int) -> int:
    """``json.loads`` of each line of this part of the file, cut by the ``.idx`` offsets."""
    offsets = np.fromfile(path + ".idx", dtype="<u8").tolist()
    count = len(offsets) - 1
    lo, hi = count * part // parts, count * (part + 1) // parts
    with open(path, "rb") as f:
        f.seek(offsets[lo])
        data = f.read(offsets[hi] - offsets[lo])
    base = offsets[lo]
    loads = json.loads
    for i in range(lo, hi):
        loads(data[offsets[i] - base : offsets[i + 1] - base])
    return hi - lo


def bare_tiny(folder: str, part: int, parts: int) -> int:
    """Read each shard of this part, cut members by the ``.tar.idx`` offsets, decode the text."""
    shards = sorted(Path(folder).glob("*.tar"))[part::parts]
    count = 0
    for shard in shards:
        offsets = np.fromfile(str(shard) + ".idx", dtype="<u8").tolist()
        with open(shard, "rb") as f:
            data = f.read(offsets[-1])
        for start in offsets[:-1]:
            header = data[start : start + 512]
            size = int(header[124:136].strip(b"\0 ") or b"0", 8)
            header[:100].rstrip(b"\0").decode()
            data[start + 512 : start + 512 + size].decode()
            count += 1
    return count


def run_bare(workload: str, workers: int, path: Path, repeat: int) -> dict[str, Any]:
    """Samples/s of the bare loop, ``repeat`` passes, over max(1, workers) processes."""
    from concurrent.futures import ProcessPoolExecutor

    fn = bare_jsonl if workload == "jsonl" else bare_tiny
    fn(str(path), 0, 1)  # warm the page cache and the imports
    parts = max(1, workers)
    start, cpu = time.perf_counter(), time.process_time()
    if parts == 1:
        count = sum(fn(str(path), 0, 1) for _ in range(repeat))
    else:
        with ProcessPoolExecutor(parts) as pool:
            jobs = [
                pool.submit(fn, str(path), p, parts) for _ in range(repeat) for p in range(parts)
            ]
            count = sum(job.result() for job in jobs)
    seconds = time.perf_counter() - start
    # CPU per sample of the one-process loop (its pool's workers are not measured: 0)
    cpu_us = (time.process_time() - cpu) / count * 1e6 if parts == 1 else 0.0
    return {
        "samples_per_s": count / seconds, "first_batch_s": 0.0, "cpu_us": cpu_us,
        "main_cpu_us_per_batch": 0.0, "main_core_share": 0.0,
    }  # fmt: skip
