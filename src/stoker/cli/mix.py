"""``stoker mix``: the planned share of each dataset of a metadataset over training."""

from __future__ import annotations

import os

import click

from stoker.cli.common import CONTEXT_SETTINGS, reports_errors


@click.command(name="mix", context_settings=CONTEXT_SETTINGS)
@click.argument("metadataset")
@click.option("--steps", type=click.IntRange(min=1), required=True, help="Global batches.")
@click.option("--windows", type=click.IntRange(min=1), default=10, show_default=True,
              help="Rows: windows of steps, each with the mean share per dataset.")  # fmt: skip
@click.option("--split", default="train", show_default=True, help="The split to show.")
@click.option("--html", "html_out", type=click.Path(dir_okay=False), default=None,
              help="Also write a page plotting the shares (self-contained).")  # fmt: skip
@reports_errors
def command(metadataset: str, steps: int, windows: int, split: str, html_out: str | None) -> None:
    """Print the planned share of each dataset of METADATASET over STEPS global batches.

    From the weights and schedules alone (nothing is read but the YAML). Rows where a schedule
    has a point are marked with *.

    \b
    Example:
      stoker mix blend.yaml --steps 100000 --windows 20 --html mix.html
    """
    from stoker.metadataset.planned_mix import planned_mix

    mix = planned_mix(metadataset, steps, windows, split)
    names = [os.path.basename(p.rstrip("/")) or p for p in mix.datasets]
    width = max(8, *(len(n) for n in names))
    click.echo(f"{'batches':>23}  " + "  ".join(f"{n:>{width}}" for n in names))
    ends = [*mix.starts[1:], mix.steps]
    for w, (lo, hi) in enumerate(zip(mix.starts, ends, strict=True)):
        mark = "*" if any(lo <= k < hi for k in mix.knots) else " "
        row = "  ".join(f"{100 * s:>{width - 1}.1f}%" for s in mix.shares[:, w])
        click.echo(f"{lo:>10} - {hi - 1:>10}{mark}  {row}")
    if mix.knots:
        click.echo(f"* a schedule has a point in the window (at {', '.join(map(str, mix.knots))})")
    if html_out is not None:
        from stoker.preview.mix_html import render_mix_html

        fine = planned_mix(metadataset, steps, max(windows, _PLOT_POINTS), split)
        with open(html_out, "w", encoding="utf-8") as f:
            f.write(render_mix_html(fine, os.path.basename(metadataset)))
        click.echo(f"wrote {html_out}")


#: Windows plotted by ``--html`` (points per line).
_PLOT_POINTS = 400
