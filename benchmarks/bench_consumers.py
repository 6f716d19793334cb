"""Throughput through real consumers: stoker and Megatron-Energon through the loops users write.

The other loader benchmarks drop each batch before asking for the next; training loops often do
not. Each configuration runs in a fresh subprocess, alternating the tools (and ``stoker-base``,
stoker from another source tree: ``--baseline-src``), W=2, batch 32, on the photo dataset of
``bench_loader.py`` (20 shards of ~56 KB JPEGs, 256-512 px), uint8 (``torchrgb8``) and float
(``torchrgb``) images, through:

* ``plain``: ``for batch in loader`` (holds the last batch while it asks for the next);
* ``hold2`` / ``hold3``: keeps the last 2 / 3 batches (the previous one for logging, say);
* ``accum4``: gradient accumulation collecting 4 micro-batches before its step;
* ``pin``: the loader's pin-memory thread with an injected pin function (a copy into blocks
  reused as torch's pinned-memory allocator reuses its own: there is no accelerator here).
  stoker: ``get_loader(pin_memory=True)``; Energon's loader pins in torch's DataLoader thread,
  which runs only with an accelerator, so the same copy runs on a thread of the same depth
  (stoker's ``PinThread``) over its batches;
* ``lightning``: ``pytorch_lightning.Trainer.fit`` of a tiny CPU model whose step takes a fixed
  ``--step-ms``; stoker's loader goes straight in (``train_dataloaders=loader``), Energon's
  through a ``LightningDataModule`` whose ``transfer_batch_to_device`` allows its frozen
  dataclasses.

Printed: samples/s per configuration (median of ``--repeats`` runs) and the ratios stoker /
Energon and held / plain. The machine this runs on is shared (other jobs use its two cores):
compare figures of one run only.

Usage::

    python benchmarks/bench_consumers.py --quick
    python benchmarks/bench_consumers.py --consumers plain,hold2,hold3 --dtypes uint8
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import DatasetSpec, ensure_dataset, prepare_captioning
from _loaders import BATCH, Config, open_loader

REPO = Path(__file__).resolve().parent.parent
RESULT = "BENCH-RESULT "
CONSUMERS = ("plain", "hold2", "hold3", "accum4", "pin", "lightning")
WARMUP = 4  # batches before the timed ones: every worker has started


class HostCache:
    """Pinning without an accelerator, as torch's pinned-memory allocator behaves: each tensor is
    copied into a block of the next power-of-two size that the allocator keeps and hands out
    again once the tensor last given out from it is freed (torch caches freed pinned blocks by
    size class the same way, so a run does not page-fault a fresh batch-sized buffer per batch;
    padded image batches differ in shape from batch to batch)."""

    def __init__(self) -> None:
        self._blocks: dict[int, list[tuple[Any, Any]]] = {}
        self._lock = threading.Lock()

    def copy(self, tensor: Any) -> Any:
        import torch

        size = 1 << max(tensor.numel() * tensor.element_size() - 1, 1).bit_length()
        with self._lock:
            blocks = self._blocks.setdefault(size, [])
            free = [i for i, (_, given) in enumerate(blocks) if given() is None]
            block = blocks.pop(free[0])[0] if free else torch.empty(size, dtype=torch.uint8)
            out = block[: tensor.numel() * tensor.element_size()].view(tensor.dtype)
            out = out.view(tensor.shape)  # a tensor of its own: freed when the consumer drops it
            blocks.append((block, weakref.ref(out)))
        return out.copy_(tensor)


_HOST = HostCache()


def fake_pin(value: Any) -> Any:
    """What pinning costs without an accelerator: each tensor copied (see :class:`HostCache`)."""
    import torch

    from stoker.model.samples import pin_memory

    original = torch.Tensor.pin_memory
    torch.Tensor.pin_memory = lambda t, *a, **k: _HOST.copy(t)  # type: ignore[method-assign]
    try:
        return pin_memory(value)
    finally:
        torch.Tensor.pin_memory = original  # type: ignore[method-assign]


def loop(batches: Any, count: int, hold: int, accumulate: int = 0) -> float:
    """Seconds for ``count`` batches after :data:`WARMUP`, keeping the last ``hold`` (or
    collecting ``accumulate`` before a step)."""
    kept: collections.deque[Any] = collections.deque(maxlen=hold)
    micro: list[Any] = []
    start = 0.0
    for n, batch in enumerate(batches):
        if n == WARMUP:
            start = time.perf_counter()
        if accumulate:
            micro.append(batch)
            if len(micro) == accumulate:
                micro.clear()  # the optimizer step
        else:
            kept.append(batch)
        if n == WARMUP + count:
            return time.perf_counter() - start
    raise RuntimeError("the loader ran out of batches")


def pinned_by_thread(loader: Any) -> Any:
    """Energon's batches pinned on a thread ``prefetch_factor`` deep (see the module)."""
    from stoker.runtime.pin_thread import PinThread

    it = iter(loader)
    thread = PinThread(lambda: next(it), fake_pin, depth=2)
    try:
        while True:
            yield thread.get()
    finally:
        thread.close()


def run_lightning(tool: str, loader: Any, count: int, step_ms: float) -> float:
    import pytorch_lightning as pl
    import torch
    from lightning_utilities.core.apply_func import apply_to_collection

    marks: list[float] = []

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            started = time.perf_counter()
            colours = batch.image[:, :, ::32, ::32].float().mean(dim=(2, 3))
            loss = ((self.layer(colours) - 0.5) ** 2).mean()
            time.sleep(max(0.0, step_ms / 1000 - (time.perf_counter() - started)))
            marks.append(time.perf_counter())
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class Module(pl.LightningDataModule):
        def train_dataloader(self) -> Any:
            return loader

        def transfer_batch_to_device(self, batch: Any, device: Any, idx: int) -> Any:
            return apply_to_collection(
                batch, torch.Tensor, lambda t: t.to(device), allow_frozen=True
            )

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=WARMUP + count + 1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        limit_val_batches=0,
    )
    if tool.startswith("stoker"):
        trainer.fit(Tiny(), train_dataloaders=loader)  # straight in
    else:
        trainer.fit(Tiny(), datamodule=Module())
    return marks[WARMUP + count] - marks[WARMUP]


def child_main(spec: dict[str, Any]) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    tool, dtype, consumer = spec["tool"], spec["dtype"], spec["consumer"]
    config = Config(tool, 2, dtype)
    count = spec["batches"]
    if consumer == "pin" and tool.startswith("stoker"):
        import torch

        try:  # where the loader pins batches
            import stoker.runtime.process_producers as loader_module
        except ImportError:  # stoker before the loader was split
            import stoker.runtime.loader as loader_module  # type: ignore[no-redef]

        torch.cuda.is_available = lambda: True  # the loader starts its pin thread
        loader_module.pin_memory = fake_pin  # type: ignore[assignment]
        import stoker

        original = stoker.get_loader
        stoker.get_loader = lambda ds, **kw: original(ds, pin_memory=True, **kw)  # type: ignore[assignment]
    loader = open_loader(config, Path(spec["path"]))
    if consumer == "lightning":
        seconds = run_lightning(tool, loader, count, spec["step_ms"])
    elif consumer == "pin" and tool == "energon":
        seconds = loop(pinned_by_thread(loader), count, 1)
    else:
        hold = {"plain": 1, "pin": 1, "hold2": 2, "hold3": 3}.get(consumer, 0)
        seconds = loop(iter(loader), count, hold, 4 if consumer == "accum4" else 0)
    result: dict[str, Any] = {"samples_per_s": count * BATCH / seconds}
    stats = getattr(loader, "stats", None)
    if callable(stats):
        s = stats()
        result.update(
            fallbacks=getattr(s, "slot_fallbacks", None),
            waits=getattr(s, "slot_waits", None),
            shm_mb=round(s.shm_bytes / 2**20),
        )
    print(RESULT + json.dumps(result), flush=True)
    close = getattr(loader, "close", None)
    if close is not None:
        close()


def in_subprocess(spec: dict[str, Any], src: Path | None, timeout: float) -> dict[str, Any]:
    import os

    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src.resolve()), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, cwd=REPO, env=env, timeout=timeout)
    lines = [x for x in proc.stdout.decode().splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {spec} exited {proc.returncode}\n{proc.stderr.decode()[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT) :])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench-data")
    parser.add_argument("--quick", action="store_true", help="4 x 250 samples, 10 batches, 1 run")
    parser.add_argument("--tools", default="stoker,energon", help="comma-separated")
    parser.add_argument("--consumers", default=",".join(CONSUMERS), help="comma-separated")
    parser.add_argument("--dtypes", default="uint8,float")
    parser.add_argument("--batches", type=int, help="timed batches (60)")
    parser.add_argument("--repeats", type=int, help="runs of each configuration (3)")
    parser.add_argument("--step-ms", type=float, default=5.0, help="Lightning step time")
    parser.add_argument("--baseline-src", type=Path, help="also run stoker from this src/")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(json.loads(args.child))
        return 0
    tools = args.tools.split(",")
    if args.baseline_src is not None:
        tools.insert(1, "stoker-base")
    spec = DatasetSpec("photos", 4, 250) if args.quick else DatasetSpec("photos", 20, 1000)
    dataset = ensure_dataset(args.data_dir, spec)
    prepare_captioning(dataset)
    batches = args.batches or (10 if args.quick else 60)
    repeats = args.repeats or (1 if args.quick else 3)
    results: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    print(f"{dataset.spec.name}, W=2, batch {BATCH}, {batches} timed batches", flush=True)
    for _ in range(repeats):  # alternating: every configuration once per round
        for consumer in args.consumers.split(","):
            for dtype in args.dtypes.split(","):
                for tool in tools:
                    spec_ = {"tool": "stoker" if tool == "stoker-base" else tool, "dtype": dtype,
                             "consumer": consumer, "batches": batches, "path": str(dataset.path),
                             "step_ms": args.step_ms}  # fmt: skip
                    src = args.baseline_src if tool == "stoker-base" else None
                    result = in_subprocess(spec_, src, args.timeout)
                    results.setdefault((consumer, dtype, tool), []).append(result)
                    extra = {k: v for k, v in result.items() if k != "samples_per_s"}
                    rate = result["samples_per_s"]
                    print(f"  {consumer:<9} {dtype:<5} {tool:<11} {rate:>7,.0f} samples/s {extra}")
    print_table(results, tools)
    return 0


def print_table(
    results: dict[tuple[str, str, str], list[dict[str, Any]]], tools: list[str]
) -> None:
    def rate(key: tuple[str, str, str]) -> float | None:
        runs = results.get(key)
        return statistics.median(r["samples_per_s"] for r in runs) if runs else None

    print("\nmedians (samples/s); ratios: stoker / energon, and / the same tool's plain loop")
    print(f"{'consumer':<10}{'dtype':<7}" + "".join(f"{t:>13}" for t in tools) + "   ratios")
    for consumer, dtype, _ in sorted({(*k[:2], "") for k in results}, key=lambda k: (k[1], k[0])):
        rates = {t: rate((consumer, dtype, t)) for t in tools}
        cells = "".join(f"{r:>13,.0f}" if r else f"{'-':>13}" for r in rates.values())
        notes = []
        stoker, energon = rates.get("stoker"), rates.get("energon")
        if stoker and energon:
            notes.append(f"stoker/energon {stoker / energon:.2f}x")
        plain = rate(("plain", dtype, "stoker"))
        if stoker and plain and consumer != "plain":
            notes.append(f"stoker/plain {stoker / plain:.2f}")
        base = rates.get("stoker-base")
        if stoker and base:
            notes.append(f"after/before {stoker / base:.2f}x")
        print(f"{consumer:<10}{dtype:<7}{cells}   {', '.join(notes)}")


if __name__ == "__main__":
    sys.exit(main())
