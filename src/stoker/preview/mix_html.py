"""``stoker mix --html``: the planned share of each dataset over the steps, as one static page.

The plot is an inline SVG drawn here (no script, no network): one line per dataset (its mean
planned share in each window of steps), a dashed vertical line at each step where a schedule has
a point, axes with step and percent ticks, and a legend. The table below it holds the same
numbers as ``stoker mix`` prints.
"""

from __future__ import annotations

import html

import numpy as np

from stoker.metadataset.planned_mix import PlannedMix

#: Plot area inside the SVG (pixels) and its margins.
_W, _H, _LEFT, _TOP, _BOTTOM = 880, 360, 56, 16, 40
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
.grid { stroke: #e4e4e4; } .axis { stroke: #555; }
.knot { stroke: #888; stroke-dasharray: 4 3; }
.share { fill: none; stroke-width: 2; }
table { border-collapse: collapse; margin-top: 16px; }
td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }
tr.knot-row td:first-child::after { content: " *"; }
"""


def render_mix_html(mix: PlannedMix, title: str) -> str:
    """A self-contained page plotting ``mix`` (see the module docstring).

    Example:
        >>> import numpy as np
        >>> mix = PlannedMix(["/d/a", "/d/b"], [0, 50], 100, np.array([[1.0, 0.5], [0, 0.5]]), [50])
        >>> page = render_mix_html(mix, "plan.yaml")
        >>> page.count("class='share'"), page.count("class='knot'")
        (2, 1)
    """
    names = [p.rstrip("/").rsplit("/", 1)[-1] or p for p in mix.datasets]
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>stoker mix: {html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Planned mix of {html.escape(title)}</h1>"
        f"<p>Share of each dataset over {mix.steps} global batches, from the weights and "
        "schedules alone (nothing read). Dashed lines: a schedule has a point there.</p>"
        f"{_svg(mix, names)}{_table(mix, names)}</body></html>"
    )


def _x(step: float, steps: int) -> float:
    return _LEFT + _W * step / max(steps, 1)


def _y(share: float) -> float:
    return _TOP + _H * (1.0 - share)


def _svg(mix: PlannedMix, names: list[str]) -> str:
    ends = [*mix.starts[1:], mix.steps]
    mids = (np.asarray(mix.starts) + np.asarray(ends)) / 2
    parts = [f"<svg id='plot' width='{_LEFT + _W + 200}' height='{_TOP + _H + _BOTTOM}' "
             "xmlns='http://www.w3.org/2000/svg'>"]  # fmt: skip
    for tick in np.linspace(0, 1, 5):
        y = _y(tick)
        parts.append(f"<line class='grid' x1='{_LEFT}' x2='{_LEFT + _W}' y1='{y}' y2='{y}'/>"
                     f"<text x='{_LEFT - 8}' y='{y + 4}' text-anchor='end'>{100 * tick:.0f}%"
                     "</text>")  # fmt: skip
    for tick in np.linspace(0, mix.steps, 6):
        x = _x(tick, mix.steps)
        parts.append(f"<text x='{x}' y='{_TOP + _H + 18}' text-anchor='middle'>{int(tick)}"
                     "</text>")  # fmt: skip
    parts.append(f"<line class='axis' x1='{_LEFT}' x2='{_LEFT + _W}' y1='{_y(0)}' y2='{_y(0)}'/>"
                 f"<line class='axis' x1='{_LEFT}' x2='{_LEFT}' y1='{_y(1)}' y2='{_y(0)}'/>"
                 f"<text x='{_LEFT + _W / 2}' y='{_TOP + _H + 36}' text-anchor='middle'>"
                 "global batch</text>")  # fmt: skip
    for knot in mix.knots:
        x = _x(knot, mix.steps)
        note = f"<title>a schedule has a point at batch {knot}</title>"
        parts.append(f"<line class='knot' data-step='{knot}' x1='{x}' x2='{x}' y1='{_y(1)}' "
                     f"y2='{_y(0)}'>{note}</line>")  # fmt: skip
    for d, name in enumerate(names):
        color = _COLORS[d % len(_COLORS)]
        points = " ".join(f"{_x(m, mix.steps):.1f},{_y(s):.1f}"
                          for m, s in zip(mids, mix.shares[d], strict=True))  # fmt: skip
        parts.append(f"<polyline class='share' data-dataset='{html.escape(name)}' "
                     f"stroke='{color}' points='{points}'><title>{html.escape(name)}</title>"
                     "</polyline>")  # fmt: skip
        y = _TOP + 16 + 20 * d
        label = f"<text x='{_LEFT + _W + 42}' y='{y}'>{html.escape(name)}</text>"
        swatch = (f"<line x1='{_LEFT + _W + 16}' x2='{_LEFT + _W + 36}' y1='{y - 4}' "
                  f"y2='{y - 4}' stroke='{color}' stroke-width='3'/>")  # fmt: skip
        parts.append(f"<g class='legend'>{swatch}{label}</g>")
    parts.append("</svg>")
    return "".join(parts)


def _table(mix: PlannedMix, names: list[str]) -> str:
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    rows = []
    ends = [*mix.starts[1:], mix.steps]
    step = max(1, len(mix.starts) // 20)  # at most about 20 rows
    for w in range(0, len(mix.starts), step):
        lo, hi = mix.starts[w], ends[min(w + step, len(ends)) - 1]
        knot = any(lo <= k < hi for k in mix.knots)
        shares = mix.shares[:, w : w + step].mean(axis=1)
        cells = "".join(f"<td>{100 * s:.1f}%</td>" for s in shares)
        rows.append(f"<tr class='{'knot-row' if knot else ''}'><td>{lo} - {hi - 1}</td>{cells}"
                    "</tr>")  # fmt: skip
    return f"<table><tr><th>batches</th>{head}</tr>{''.join(rows)}</table>"
