"""The bench's results as a text table and as plain data (for ``--json``).

Example:
    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
"""

from __future__ import annotations

import dataclasses
from typing import Any

from stoker.preview.bench import KEEPS_UP, BenchReport, BenchRun

#: Column titles of the table, in order.
COLUMNS = ("workers", "samples/s", "first batch", "peak RSS", "data wait", "bottleneck")


def format_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def bottleneck_of(run: BenchRun, consumer_ms: float) -> str:
    """``training step`` where the loader kept ahead of it, else the loader's slowest stage
    (from ``stats()``), or what the bench itself can tell.

    Without ``stats()`` the bench knows only whether the training step waited for data 5 % of
    the time or more (``loader``) or the loader kept ahead of it (``training step``).
    """
    if consumer_ms > 0 and run.wait_frac < KEEPS_UP:
        return "training step"
    if run.bottleneck:
        return run.bottleneck
    if consumer_ms <= 0:
        return "loader (no step)"
    return "loader" if run.wait_frac >= KEEPS_UP else "training step"


def table_rows(report: BenchReport) -> list[tuple[str, ...]]:
    consumer_ms = report.settings.consumer_ms
    return [
        (
            str(run.workers) + ("" if run.worker_type is None else f" {run.worker_type}"),
            f"{run.samples_per_s:,.0f}",
            f"{run.first_batch_s:.2f} s",
            format_bytes(run.peak_rss),
            f"{run.wait_frac:.0%}",
            bottleneck_of(run, consumer_ms),
        )
        for run in report.runs
    ]


def format_report(report: BenchReport) -> list[str]:
    """The header, the table (one row per worker count) and the recommendation."""
    s = report.settings
    amount = f"{s.seconds:g} s" if s.seconds is not None else f"{s.batches} batches"
    lines = [
        f"{s.path} [{s.split_part}]: batch size {s.batch_size}, {amount} per setting, "
        f"training step {s.consumer_ms:g} ms, keeping {s.hold} batch(es), "
        f"task encoder {s.task_encoder or 'default'}",
        "",
    ]
    rows = [COLUMNS, *table_rows(report)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    for n, row in enumerate(rows):
        cells = [row[0].rjust(widths[0])]
        cells += [cell.rjust(w) for cell, w in zip(row[1:-1], widths[1:-1], strict=True)]
        cells.append(row[-1])
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines += ["", *recommendation_lines(report)]
    if not report.has_stats:
        lines.append(
            "(this loader has no stats(): bottleneck is 'loader' or 'training step' only; "
            "data wait is measured around next())"
        )
    return lines


def recommendation_lines(report: BenchReport) -> list[str]:
    rec = report.recommendation
    prefetch = "n/a (no workers)" if rec.prefetch_factor is None else str(rec.prefetch_factor)
    return [
        f"recommended: num_workers={rec.workers}, prefetch_factor={prefetch}",
        f"  {rec.reason}",
    ]


def report_data(report: BenchReport) -> dict[str, Any]:
    """Plain data for JSON: settings, runs (with their bottleneck), recommendation."""
    data = dataclasses.asdict(report)
    for run, row in zip(data["runs"], report.runs, strict=True):
        run["bottleneck"] = bottleneck_of(row, report.settings.consumer_ms)
    return data
