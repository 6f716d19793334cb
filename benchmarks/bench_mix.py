"""Benchmark the data mix over time: ``stoker mix`` at 10^6 steps, the state's bytes per dataset,
and a restore at global batch 10^6 of a scheduled blend.

1. ``planned_mix`` of a metadataset with a ``linear`` and a ``step`` schedule over 10^6 global
   batches (``stoker mix --steps 1000000``), and that plus the ``--html`` page (400 windows).
2. ``save_state_rank()``'s JSON bytes for blends of 2, 8 and 32 small JSONL datasets (4 virtual
   workers): the growth per dataset.
3. A state at global batch 10^6 of a blend whose weight ramps linearly over the whole 10^6
   batches (the worst case: no constant stretch to sum in one step) and of a ``step`` schedule:
   the stream counts there come from the planner (``StreamSchedule.next_block``); then, in a
   fresh loader (in-process, ``num_workers=0``), ``restore_state_rank`` alone, and it plus the
   first batch, next to the first batch of a fresh loader at step 0, alternating, medians.

The machine is shared: each figure is the median of ``--repeat`` runs, before/after alternating.

Usage::

    python benchmarks/bench_mix.py            # about a minute
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    stateless,
)
from stoker.format.jsonl import prepare_jsonl
from stoker.metadataset.planned_mix import planned_mix
from stoker.preview.mix_html import render_mix_html

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
BATCH, VIRTUAL, STEPS = 4, 4, 10**6


class Keys(DefaultTaskEncoder):  # type: ignore[type-arg]
    @stateless
    def encode_sample(self, sample: Any) -> str:
        return f"{sample['json']['src']}:{sample['json']['i']}"

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


def jsonl(folder: Path, name: str, n: int) -> None:
    lines = [json.dumps({"src": name, "i": i}) + "\n" for i in range(n)]
    (folder / f"{name}.jsonl").write_text("".join(lines))
    prepare_jsonl(str(folder / f"{name}.jsonl"))


def mds(folder: Path, name: str, weights: dict[str, str]) -> Path:
    body = "".join(f"      - weight: {w}\n        path: {s}.jsonl\n" for s, w in weights.items())
    path = folder / name
    path.write_text(V2 + body)
    return path


def median_s(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def loader(path: Path) -> Any:
    dataset = get_train_dataset(
        str(path), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
        batch_size=BATCH, shuffle_buffer_size=10, max_samples_per_sequence=20,
        virtual_workers=VIRTUAL, task_encoder=Keys(),
    )  # fmt: skip
    return get_savable_loader(dataset)


def plan_figures(path: Path, repeat: int) -> None:
    plain = median_s(lambda: planned_mix(str(path), STEPS), repeat)
    page = median_s(lambda: render_mix_html(planned_mix(str(path), STEPS, 400), "m"), repeat)
    print(f"stoker mix, 10^6 steps:            {plain * 1000:7.1f} ms (median of {repeat})")
    print(f"stoker mix --html, 10^6 steps:     {page * 1000:7.1f} ms")


def state_bytes(folder: Path) -> None:
    sizes = {}
    for d in (2, 8, 32):
        path = mds(folder, f"n{d}.yaml", {f"s{i}": "1" for i in range(d)})
        with loader(path) as one:
            it = iter(one)
            for _ in range(20):
                next(it)
            sizes[d] = len(json.dumps(one.save_state_rank()))
    per = (sizes[32] - sizes[2]) / 30
    print("state JSON bytes: " + ", ".join(f"{d} datasets {n}" for d, n in sizes.items())
          + f"; {per:.0f} bytes per dataset added")  # fmt: skip


def state_at(path: Path) -> dict[str, Any]:
    """A state at global batch 10^6, the stream counts from the planner."""
    with loader(path) as one:
        it = iter(one)
        next(it)
        state = one.save_state_rank()
        dataset = one.dataset
    streams = {}
    for v in range(VIRTUAL):
        schedule = dataset.schedule(v)
        counts = [0] * len(dataset.sources)
        left = STEPS // VIRTUAL * BATCH
        while left:
            ids = schedule.next_block(counts, None, min(left, 1 << 16))
            for d, n in enumerate(ids.tolist().count(d) for d in range(len(counts))):
                counts[d] += n
            left -= len(ids)
        streams[str(v)] = [*counts, 0]
    return {**state, "streams": streams, "t": STEPS, "yielded": STEPS}


def restore_figures(path: Path, label: str, repeat: int) -> None:
    state = state_at(path)
    restore, restore_first, fresh = [], [], []
    for _ in range(repeat):  # alternating: restore, restore + first batch, fresh first batch
        with loader(path) as one:
            start = time.perf_counter()
            one.restore_state_rank(state)
            restore.append(time.perf_counter() - start)
        with loader(path) as one:
            start = time.perf_counter()
            one.restore_state_rank(state)
            next(iter(one))
            restore_first.append(time.perf_counter() - start)
        with loader(path) as one:
            start = time.perf_counter()
            next(iter(one))
            fresh.append(time.perf_counter() - start)
    med = statistics.median
    print(f"{label}: restore at batch 10^6 {med(restore) * 1000:6.1f} ms; restore + first batch "
          f"{med(restore_first) * 1000:6.1f} ms; fresh first batch {med(fresh) * 1000:6.1f} ms "
          f"(medians of {repeat})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(32):
            jsonl(folder, f"s{i}", 200)
        jsonl(folder, "a", 3000)
        jsonl(folder, "b", 6000)
        ramp = mds(folder, "ramp.yaml", {"a": f"{{linear: {{0: 100, {STEPS}: 0}}}}", "b": "100"})
        step = mds(folder, "step.yaml", {"a": "{step: {0: 100, 500000: 10, 900000: 0}}",
                                         "b": "{linear: {0: 10, 1000: 100}}"})  # fmt: skip
        plan_figures(step, args.repeat)
        state_bytes(folder)
        restore_figures(ramp, "linear over 10^6 batches", args.repeat)
        restore_figures(step, "step schedule          ", args.repeat)


if __name__ == "__main__":
    main()
