"""A training loop that checkpoints its loader and can be killed at any instant.

Run as a script by ``test_crash_resume.py``::

    python _crash_train.py DATASET WORKDIR [--every 5] [--step-sleep 0.03] [--hold-at N]

Exactly-once bookkeeping. Each step appends one line ``{"step", "pid", "keys"}`` to
``WORKDIR/consumed.jsonl`` (flushed and fsynced: the side effect of the step). Every ``--every``
steps, after that step's line, ``WORKDIR/ckpt.json`` is replaced atomically (write a temporary
file, fsync, ``os.replace``) with ``{"step", "loader_state"}``. A run starts from the checkpoint:
it first rewrites the log (atomically too) keeping only the lines of steps up to the checkpoint's
step, so that the steps a killed run did after its last checkpoint, which the resumed run does
again, are counted once. A line torn by the kill is dropped with them. At the end of the epoch
(``repeat=False``) it writes ``WORKDIR/done.json``.

``--hold-at N`` makes the run stop after step N's line and wait there (writing
``WORKDIR/held.json``), so that a test kills it at that step, whatever the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from stoker import WorkerConfig, get_savable_loader, get_train_dataset


def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def split_log(log: Path, step: int) -> tuple[list[str], int]:
    """The log lines of steps 1..``step``, and how many complete lines come after them.

    Parsing stops at a torn line (only the last line can be one).
    """
    lines, dropped = [], 0
    if log.exists():
        for line in log.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                break
            if entry["step"] > step:
                dropped += 1
            else:
                lines.append(line)
    if len(lines) != step:
        raise RuntimeError(f"the log holds {len(lines)} committed steps, the checkpoint {step}")
    return lines, dropped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--step-sleep", type=float, default=0.03)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hold-at", type=int, default=0)
    args = parser.parse_args(argv)
    ckpt, log = args.workdir / "ckpt.json", args.workdir / "consumed.jsonl"

    saved: dict[str, Any] | None = json.loads(ckpt.read_text()) if ckpt.exists() else None
    step = saved["step"] if saved else 0
    committed, dropped = split_log(log, step)
    atomic_write(log, "".join(line + "\n" for line in committed))
    print(f"start at step {step}, dropped {dropped} uncommitted steps", flush=True)

    dataset = get_train_dataset(
        args.dataset,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=args.workers),
        batch_size=4,
        shuffle_buffer_size=10,
        max_samples_per_sequence=5,
        repeat=False,
    )
    with get_savable_loader(dataset) as loader, log.open("a") as out:
        if saved:
            loader.restore_state_rank(saved["loader_state"])
        for batch in loader:
            step += 1
            out.write(json.dumps({"step": step, "pid": os.getpid(), "keys": batch.__key__}))
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
            time.sleep(args.step_sleep)  # the training step
            if step == args.hold_at:  # to be killed here
                atomic_write(args.workdir / "held.json", json.dumps({"step": step}))
                while True:
                    time.sleep(1)
            if step % args.every == 0:
                state = {"step": step, "loader_state": loader.save_state_rank()}
                atomic_write(ckpt, json.dumps(state))
    atomic_write(args.workdir / "done.json", json.dumps({"steps": step}))
    print(f"done at step {step}", flush=True)


if __name__ == "__main__":
    main()
