"""``analyze-debug``: what each worker loaded and when, from ``worker_debug_path`` files.

Reads the JSON lines written under ``WorkerConfig(worker_debug_path=...)`` (see
:mod:`stoker.runtime.debug_log`): each argument is a file or a folder whose ``*.jsonl`` files are
read (as Energon's command does). Prints per rank and worker the batches, samples, time span and
rate, then the totals: unique sample keys and keys loaded more than once in one epoch.

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
from stoker.runtime.debug_log import BATCH_LINE


@dataclass
class WorkerSummary:
    """The batches one producer (rank, worker) logged."""

    batches: int = 0
    samples: int = 0
    first: float | None = None
    last: float | None = None
    streams: set[int] = field(default_factory=set)


def read_lines(paths: list[Path]) -> list[dict[str, object]]:
    """The batch lines of the given files and folders (``*.jsonl`` in a folder)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(path.glob("*.jsonl")))
        elif path.is_file():
            files.append(path)
        else:
            raise click.ClickException(f"{path}: no such file or folder.")
    lines = []
    for file in files:
        with file.open(encoding="utf-8") as f:
            for n, text in enumerate(f, 1):
                try:
                    line = json.loads(text)
                except json.JSONDecodeError as e:
                    raise click.ClickException(f"{file}:{n}: not a JSON line ({e}).") from e
                if isinstance(line, dict) and line.get("t") == BATCH_LINE:
                    lines.append(line)
    if not lines:
        raise click.ClickException(
            f"no batch lines in {', '.join(map(str, files)) or 'the given folders'}: write them "
            'with WorkerConfig(worker_debug_path="debug/worker_{worker_id}.jsonl") and pass the '
            "folder or files (Energon's own debug logs are not read)."
        )
    return lines


def summarise(lines: list[dict[str, object]]) -> dict[str, object]:
    """Per ``"rank/worker"`` figures and totals of the batch lines."""
    workers: dict[str, WorkerSummary] = collections.defaultdict(WorkerSummary)
    seen: collections.Counter[tuple[object, object, str]] = collections.Counter()
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
        "unique_keys": len({k for _, _, k in seen}),
        "repeated_in_epoch": sum(1 for n in seen.values() if n > 1),
    }


@click.command(name="analyze-debug", context_settings=CONTEXT_SETTINGS)
@click.argument("log_paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def command(log_paths: tuple[Path, ...], as_json: bool) -> None:
    """Summarise what each worker loaded and when, from worker_debug_path files.

    LOG_PATHS are files or folders of *.jsonl files written with
    WorkerConfig(worker_debug_path="debug/worker_{worker_id}.jsonl").
    """
    summary = summarise(read_lines(list(log_paths)))
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
