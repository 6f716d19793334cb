"""The bench's HTML report: the table, the recommendation and plots as inline SVG (matplotlib).

The page is self-contained (no script, no network): open it anywhere or attach it to an issue.
Plots: samples/s per worker count, the data-wait fraction, peak memory, and time per stage when
the loader reports it through ``stats()``.

Example:
    >>> from stoker.preview.bench import BenchSettings, run_bench
    >>> report = run_bench(BenchSettings("coco-wds", workers=(0,), batch_size=4, batches=5))
    >>> page = render_bench_html(report)
    >>> page.count("<svg")
    4
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable
from typing import Any

from stoker.errors import ConfigError
from stoker.preview.bench import BenchReport
from stoker.preview.bench_report import COLUMNS, format_report, recommendation_lines, table_rows

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1100px;color:#222;
background:#f6f6f8;padding:0 1em}
h1{font-size:1.3em;margin:.2em 0}.settings{color:#555;font-size:.9em}
table{border-collapse:collapse;background:#fff;margin:1em 0}
th,td{padding:.35em .8em;border-bottom:1px solid #e4e4e8;text-align:right}
th{background:#eef}td:last-child,th:last-child{text-align:left}
.rec{background:#e9f6ec;border-left:4px solid #2a8a45;padding:.6em 1em;margin:1em 0}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(420px,1fr));gap:1em}
figure{background:#fff;margin:0;padding:.5em;border-radius:6px;box-shadow:0 1px 3px #0002}
figure svg{width:100%;height:auto}figcaption{font-size:.85em;color:#555}
pre{background:#fff;padding:.8em;overflow:auto;font-size:.8em}
"""
_COLOUR = "#3366aa"


def render_bench_html(report: BenchReport) -> str:
    """A self-contained HTML page of ``report`` with its plots inline."""
    esc = html.escape
    s = report.settings
    figures = [
        _figure("throughput", "samples/s per worker count", _throughput, report),
        _figure("data-wait", "share of the loop's time spent waiting in next()", _wait, report),
    ]
    if any(run.peak_rss is not None for run in report.runs):
        figures.append(_figure("memory", "peak RSS of the process tree", _memory, report))
    if any(run.stage_seconds for run in report.runs):
        figures.append(_figure("stages", "time per stage (from loader.stats())", _stages, report))
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>"
        for row in table_rows(report)
    )
    rec = "<br>".join(esc(line.strip()) for line in recommendation_lines(report))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stoker bench: {esc(s.path)}</title><style>{_CSS}</style></head>\n<body>"
        f"<h1>stoker bench: {esc(s.path)}</h1>"
        f'<p class="settings">{esc(format_report(report)[0])}</p>'
        f'<table id="runs"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
        f'<div class="rec">{rec}</div><div class="plots">{"".join(figures)}</div>'
        "\n</body></html>\n"
    )


def _figure(name: str, caption: str, draw: Callable[[Any, BenchReport], None], r: Any) -> str:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError(
            "the HTML report needs matplotlib, which is not installed.",
            hint="pip install 'stoker[bench]' (or leave out --html).",
        ) from None
    with matplotlib.rc_context({"svg.hashsalt": f"stoker-{name}", "svg.fonttype": "path"}):
        figure = Figure(figsize=(5.6, 3.2), layout="constrained")
        draw(figure.add_subplot(), r)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    svg = re.sub(r"^.*?(?=<svg)", "", buffer.getvalue(), flags=re.S)
    return f'<figure id="plot-{name}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def _labels(report: BenchReport) -> list[str]:
    return [str(run.workers) for run in report.runs]


def _bars(axes: Any, report: BenchReport, values: list[float], fmt: str, ylabel: str) -> None:
    bars = axes.bar(_labels(report), values, color=_COLOUR)
    axes.bar_label(bars, labels=[fmt.format(v) for v in values], fontsize=8)
    axes.set_xlabel("num_workers")
    axes.set_ylabel(ylabel)
    axes.spines[["top", "right"]].set_visible(False)


def _throughput(axes: Any, report: BenchReport) -> None:
    _bars(axes, report, [run.samples_per_s for run in report.runs], "{:,.0f}", "samples/s")
    axes.set_title("throughput")


def _wait(axes: Any, report: BenchReport) -> None:
    _bars(axes, report, [100 * run.wait_frac for run in report.runs], "{:.0f} %", "% of time")
    axes.set_ylim(0, 105)
    axes.set_title(f"data wait (training step {report.settings.consumer_ms:g} ms)")


def _memory(axes: Any, report: BenchReport) -> None:
    values = [(run.peak_rss or 0) / 2**20 for run in report.runs]
    _bars(axes, report, values, "{:,.0f}", "MiB")
    axes.set_title("peak RSS (main + workers)")


def _stages(axes: Any, report: BenchReport) -> None:
    stages = list(dict.fromkeys(stage for run in report.runs for stage in run.stage_seconds))
    bottom = [0.0] * len(report.runs)
    for stage in stages:
        values = [run.stage_seconds.get(stage, 0.0) for run in report.runs]
        axes.bar(_labels(report), values, bottom=bottom, label=stage)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.legend(fontsize=7)
    axes.set_xlabel("num_workers")
    axes.set_ylabel("seconds (all workers)")
    axes.set_title("time per stage")
