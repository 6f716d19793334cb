"""Render a preview report as one self-contained HTML page: a card per sample, thumbnails inline.

All text is escaped; images are data URIs made by :mod:`stoker.preview.thumbnails`, so the page
can be opened or sent on without the dataset.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from stoker.preview.report import PreviewReport, PreviewSample

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;background:#f4f4f6;color:#222}
.card{background:#fff;border-radius:8px;padding:1em;margin:0 0 1em;box-shadow:0 1px 3px #0002}
.card h2{font-size:1.05em;margin:0 0 .2em;font-family:monospace}
.where{color:#666;font-size:.85em;margin-bottom:.6em}
table{border-collapse:collapse;width:100%}
td{vertical-align:top;padding:.3em .6em;border-top:1px solid #eee}
td.name{font-family:monospace;font-weight:bold;width:12em}
.summary{font-family:monospace;font-size:.85em;color:#555}
.text{white-space:pre-wrap;margin-top:.2em}
.error{color:#b00020;font-family:monospace}
img{max-width:256px;max-height:256px;margin:.3em .3em 0 0;border:1px solid #ddd}
"""


def render_html(reports: PreviewReport | Sequence[PreviewReport]) -> str:
    """A self-contained HTML page with one card per sample (all text escaped).

    Several reports (split parts) go one after the other on the same page.
    """
    esc = html.escape
    if isinstance(reports, PreviewReport):
        reports = [reports]
    title = ", ".join(f"{r.path} [{r.split_part}]" for r in reports)
    sections = []
    for report in reports:
        sections.append(
            f"<h1>{esc(report.path)} [{esc(report.split_part)}]</h1><p>"
            f"{esc(report.sample_type)}, samples {report.offset} to "
            f"{report.offset + len(report.samples) - 1} of {report.total}</p>\n"
            + "\n".join(_card(sample) for sample in report.samples)
        )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stoker preview: {esc(title)}</title><style>{_CSS}</style></head>\n"
        f"<body>{chr(10).join(sections)}\n</body></html>\n"
    )


def _card(sample: PreviewSample) -> str:
    esc = html.escape
    where = f"{sample.shard}, sample {sample.index}, byte offset {sample.offset}"
    body = f'<p class="error">{esc(sample.error)}</p>' if sample.error else _field_table(sample)
    return (
        f'<div class="card"><h2>{esc(sample.key)}</h2>'
        f'<div class="where">{esc(where)}</div>{body}</div>'
    )


def _field_table(sample: PreviewSample) -> str:
    esc = html.escape
    rows = []
    for name, summary in sample.fields.items():
        cell = f'<div class="summary">{esc(summary.summary)}</div>'
        if summary.text is not None:
            cell += f'<div class="text">{esc(summary.text)}</div>'
        cell += "".join(f'<img src="{uri}" alt="{esc(name)}">' for uri in summary.thumbnails)
        rows.append(f'<tr><td class="name">{esc(name)}</td><td>{cell}</td></tr>')
    return f"<table>{''.join(rows)}</table>"
