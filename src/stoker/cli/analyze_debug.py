"""``analyze-debug``: what each worker loaded and when, from ``worker_debug_path`` files.

Reads the JSON lines written under ``WorkerConfig(worker_debug_path=...)`` (see
:mod:`stoker.runtime.debug_log`): each argument is a file or a folder whose ``*.jsonl`` files are
read (as Energon's command does). Prints per rank and worker the batches, samples, time span and
rate, then the totals: unique sample keys and keys loaded more than once in one epoch, and the
steps (batches the training loop took, from the training process's lines). ``--heatmap-path``
draws which sample key was loaded at which step (Pillow).

Example:
    $ stoker analyze-debug debug/
"""

from __future__ import annotations

import collections
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import click

from stoker.cli.common import CONTEXT_SETTINGS
from stoker.cli.debug_heatmap import write_heatmap
from stoker.runtime.debug_log import BATCH_LINE, YIELD_LINE


@dataclass
class WorkerSummary:
    """The batches one producer (rank, worker) logged."""

    batches: int = 0
    samples: int = 0
    first: float | None = None
    last: float | None = None
    streams: set[int] = field(default_factory=set)


def log_files(paths: list[Path]) -> list[Path]:
    """The given files, and the ``*.jsonl`` files of the given folders."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.jsonl")))
        elif path.is_file():
            files.append(path)
        else:
            raise click.ClickException(f"{path}: no such file or folder.")
    return files


def read_lines(files: list[Path]) -> list[dict[str, object]]:
    """The batch lines (workers' and the training process's) of ``files``."""
    lines = []
    for file in files:
        with file.open(encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                try:
                    line = json.loads(text)
                except json.JSONDecodeError as e:
                    raise click.ClickException(f"{file}:{n}: not a JSON line ({e}).") from e
                if isinstance(line, dict) and line.get("t") in (BATCH_LINE, YIELD_LINE):
                    lines.append(line)
    if not lines:
        raise click.ClickException(
            f"no batch lines in {', '.join(map(str, files)) or 'the given folders'}: write them "
            'with WorkerConfig(worker_debug_path="debug/worker_{worker_id}.jsonl") and pass the '
            "folder or files (Energon's own debug logs are not read)."
        )
    return lines


def _keys(line: dict[str, object]) -> list[str]:
    keys = line.get("keys")
    return [str(k) for k in keys] if isinstance(keys, list) else []


def steps(lines: list[dict[str, object]]) -> list[list[str]]:
    """The keys of each step, in order: the training process's batches (the longest rank's),
    else (older logs) the workers' batches in time order."""
    taken: dict[object, list[dict[str, object]]] = collections.defaultdict(list)
    for line in lines:
        if line["t"] == YIELD_LINE:
            taken[line.get("r")].append(line)
    if not taken:
        by_time = sorted(lines, key=lambda line: float(str(line["time"])))
        return [_keys(line) for line in by_time]
    longest = max(taken.values(), key=len)
    return [_keys(line) for line in longest]


def summarise(lines: list[dict[str, object]]) -> dict[str, object]:
    """Per ``"rank/worker"`` figures and totals of the batch lines."""
    workers: dict[str, WorkerSummary] = collections.defaultdict(WorkerSummary)
    seen: collections.Counter[tuple[object, object, str]] = collections.Counter()
    taken = {k for line in lines if line["t"] == YIELD_LINE for k in _keys(line)}
    lines = [line for line in lines if line["t"] == BATCH_LINE]
    for line in lines:
        w = workers[f"{line['rank']}/{line['worker']}"]
        keys = line.get("keys")
        keys = keys if isinstance(keys, list) else []
        when = float(str(line["time"]))
        w.batches += 1
        w.samples += len(keys)
        w.first = when if w.first is None else min(w.first, when)
        w.last = when if w.last is None else max(w.last, when)
        w.streams.add(int(str(line["stream"])))
        seen.update((line["rank"], line.get("epoch"), str(k)) for k in keys)
    return {
        "workers": {
            name: {**asdict(w), "streams": sorted(w.streams)} for name, w in sorted(workers.items())
        },
        "batches": len(lines),
        "samples": sum(w.samples for w in workers.values()),
        "unique_keys": len({k for _, _, k in seen} | taken),
        "repeated_in_epoch": sum(1 for n in seen.values() if n > 1),
    }


@click.command(name="analyze-debug", context_settings=CONTEXT_SETTINGS)
@click.argument("log_paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--heatmap-path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a PNG: sample keys (rows, in order of first load) by steps (columns).",
)
@click.option(
    "--include-modality",
    default="train",
    help="Energon's choice of loader (train,val); stoker's logs hold one loader per run, so "
    "every line is read.",
)
def command(
    log_paths: tuple[Path, ...], as_json: bool, heatmap_path: Path | None, include_modality: str
) -> None:
    """Summarise what each worker loaded and when, from worker_debug_path files.

    LOG_PATHS are files or folders of *.jsonl files written with
    WorkerConfig(worker_debug_path="debug/worker_{worker_id}.jsonl").
    """
    files = log_files(list(log_paths))
    if not as_json:
        click.echo(f"Analyzing {len(files)} logs...")
    lines = read_lines(files)
    summary = summarise(lines)
    taken = steps(lines)
    summary["steps"] = len(taken)
    if heatmap_path is not None:
        write_heatmap(taken, heatmap_path)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    workers = cast(dict[str, dict[str, Any]], summary["workers"])
    for name, w in workers.items():
        rank, worker = name.split("/")
        span = (w["last"] or 0.0) - (w["first"] or 0.0)
        rate = f", {w['batches'] / span:,.1f} batches/s" if span > 0 else ""
        streams = ",".join(map(str, w["streams"]))
        click.echo(
            f"rank {rank} worker {worker}: {w['batches']} batches, {w['samples']} samples, "
            f"{span:.2f} s{rate}, streams {streams}"
        )
    click.echo(
        f"total: {summary['batches']} batches, {summary['samples']} samples, "
        f"{summary['unique_keys']} unique keys, {summary['repeated_in_epoch']} loaded more "
        "than once in an epoch"
    )
    click.echo(f"Found {summary['unique_keys']} unique sample keys, {summary['steps']} steps")
    if heatmap_path is not None:
        click.echo(f"Wrote heatmap to {heatmap_path}")
