"""Render preview reports as one self-contained HTML page: a tab per split, a gallery per dataset.

Each sample is a card with its thumbnail (or a strip of video frames), its key and caption;
clicking it opens the full text of every field, the stored parts and their byte sizes. Each
dataset section starts with a header: samples, shards, sample type, field map, media metadata
(and, for a metadataset, the expected weight against the samples drawn). All text is escaped;
images are data URIs (:mod:`stoker.preview.thumbnails`), so the page can be sent on without the
dataset.

Example:
    >>> from stoker.preview import preview_dataset
    >>> page = render_html([preview_dataset("coco-wds", num_samples=5)])
    >>> page.count('class="card"')
    5
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from stoker.preview.html_assets import CSS, SCRIPT
from stoker.preview.report import FieldSummary, PreviewReport, PreviewSample

esc = html.escape


def render_html(reports: PreviewReport | Sequence[PreviewReport]) -> str:
    """A self-contained HTML page; reports of the same split part share a tab."""
    if isinstance(reports, PreviewReport):
        reports = [reports]
    tabs: dict[str, list[PreviewReport]] = {}
    for report in reports:
        tabs.setdefault(report.split_part, []).append(report)
    paths = list(dict.fromkeys(r.path for r in reports))
    buttons, panels = [], []
    for n, (split, members) in enumerate(tabs.items()):
        shown = sum(len(r.samples) for r in members)
        buttons.append(
            f'<button class="tab" role="tab" data-panel="tab-{n}" '
            f'aria-selected="{str(n == 0).lower()}">{esc(split)} ({shown})</button>'
        )
        hidden = "" if n == 0 else " hidden"
        sections = "\n".join(_section(r) for r in members)
        panels.append(f'<div class="panel" id="tab-{n}" data-split="{esc(split)}"{hidden}>')
        panels.append(f"{sections}</div>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stoker preview: {esc(', '.join(paths))}</title><style>{CSS}</style></head>\n"
        f'<body><header><h1>stoker preview</h1><div class="path">{esc(", ".join(paths))}'
        f'</div></header>\n<nav class="tabs" role="tablist">{"".join(buttons)}</nav>\n'
        + "\n".join(panels)
        + '\n<dialog id="detail"><button class="close" aria-label="close">×</button>'
        f'<div class="body"></div></dialog>\n<script>{SCRIPT}</script>\n</body></html>\n'
    )


def _section(report: PreviewReport) -> str:
    facts = {"sample type": report.sample_type, **report.info}
    summary = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts.items())
    if report.seed is not None:
        shown = f"{len(report.samples)} of {report.total:,} samples, drawn with seed {report.seed}"
    else:
        last = report.offset + len(report.samples) - 1
        shown = f"samples {report.offset} to {last} of {report.total:,}, in order"
    cards = "\n".join(_card(sample) for sample in report.samples)
    return (
        f'<section class="dataset"><h1>{esc(report.path)} [{esc(report.split_part)}]</h1>'
        f'<dl class="summary">{summary}</dl><p class="range">{esc(shown)}</p>'
        f'<div class="gallery">\n{cards}\n</div></section>'
    )


def _card(sample: PreviewSample) -> str:
    media = _media(sample)
    badge = next((f.summary for f in sample.fields.values() if f.kind in ("video", "audio")), None)
    if sample.error:
        caption = f'<p class="caption error">{esc(sample.error)}</p>'
    else:
        caption = f'<p class="caption">{esc(_caption(sample))}</p>'
    return (
        f'<article class="card" tabindex="0" data-key="{esc(sample.key)}">{media}'
        f"<h2>{esc(sample.key)}</h2>{caption}"
        + (f'<div class="badge">{esc(badge)}</div>' if badge else "")
        + f'<div class="detail" hidden>{_detail(sample)}</div></article>'
    )


def _media(sample: PreviewSample) -> str:
    fields = list(sample.fields.items())
    videos = [(n, f) for n, f in fields if f.kind == "video" and f.thumbnails]
    if videos:
        name, field = videos[0]
        images = "".join(f'<img src="{uri}" alt="{esc(name)}">' for uri in field.thumbnails)
        return f'<div class="media strip">{images}</div>'
    images = "".join(
        f'<img src="{uri}" alt="{esc(name)}">' for name, f in fields for uri in f.thumbnails
    )
    if images:
        return f'<div class="media">{images}</div>'
    kinds = [f.summary for _, f in fields if f.kind in ("audio", "video")]
    label = kinds[0] if kinds else ", ".join(name for name, _ in fields) or "no fields"
    return f'<div class="media"><span class="placeholder">{esc(label)}</span></div>'


def _caption(sample: PreviewSample) -> str:
    texts = [f.text for f in sample.fields.values() if f.text]
    if texts:
        return texts[0]
    return "; ".join(f"{name}: {f.summary}" for name, f in list(sample.fields.items())[:2])


def _detail(sample: PreviewSample) -> str:
    where = f"{sample.shard}, sample {sample.index}, byte offset {sample.offset}"
    parts = "".join(
        f'<tr><td class="name">{esc(name)}</td><td>{_bytes(size)}</td></tr>'
        for name, size in sample.parts.items()
    )
    body = f'<p class="where">{esc(where)}</p>'
    if parts:
        body += f'<table class="parts"><tr><th>part</th><th>size</th></tr>{parts}</table>'
    if sample.error:
        return body + f'<p class="error">{esc(sample.error)}</p>'
    rows = "".join(_field_row(name, f) for name, f in sample.fields.items())
    return body + f'<table class="fields">{rows}</table>'


def _field_row(name: str, summary: FieldSummary) -> str:
    cell = f'<div class="summary-line">{esc(summary.summary)}</div>'
    text = summary.full_text if summary.full_text is not None else summary.text
    if text is not None:
        cell += f'<div class="text">{esc(text)}</div>'
    return f'<tr><td class="name">{esc(name)}</td><td>{cell}</td></tr>'


def _bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KiB ({size:,} B)" if size < 2**20 else f"{size / 2**20:.1f} MiB"
