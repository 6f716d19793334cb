"""``stoker preview``: the first samples of a split, decoded, as text, JSON or an HTML page.

This module stays free of torch at import time (``stoker preview --help`` is instant); the
library module :mod:`stoker.preview`, which decodes samples, is imported when the command runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors, style
from stoker.errors import StorageError
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.media.image_modes import IMAGE_MODES

if TYPE_CHECKING:
    from stoker.preview import PreviewReport, PreviewSample


@click.command(name="preview", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option("--split-part", default="train", show_default=True, help="Split part to read.")
@click.option(
    "--split-parts",
    metavar="PARTS",
    help="Preview these split parts in turn, comma-separated, e.g. 'train,val,test' "
    "(Energon's flag; empty parts are skipped). Overrides --split-part.",
)
@click.option(
    "-n",
    "--num-samples",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Samples to show.",
)
@click.option(
    "--offset",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Index in the split of the first sample shown.",
)
@click.option("--shuffle", is_flag=True, help="Draw the samples at random instead of in order.")
@click.option(
    "--seed",
    type=int,
    help="Seed of --shuffle (default 0; the same seed shows the same samples). Implies --shuffle.",
)
@click.option(
    "--blend-batches",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="For a metadataset: batches of 16 drawn from the blend to compare each dataset's "
    "share with its weight (0: skip).",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write a self-contained HTML page with image thumbnails to this file.",
)
@click.option(
    "--image-decode",
    type=click.Choice(list(IMAGE_MODES)),
    metavar="MODE",
    default="torchrgb8",
    show_default=True,
    help=f"Image mode, as the loader's SampleDecoder takes it: {', '.join(IMAGE_MODES)}.",
)
@click.option(
    "--split-config",
    default=DEFAULT_SPLIT_CONFIG,
    show_default=True,
    help="Split config file in .nv-meta.",
)
@click.option(
    "--dataset-config",
    default=DEFAULT_DATASET_YAML,
    show_default=True,
    help="Dataset config file in .nv-meta.",
)
@click.option(
    "--trust-sample-loader",
    is_flag=True,
    help="Run the sample_loader.py that dataset.yaml names (code shipped with the data).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the samples' summaries as JSON.")
@reports_errors
def command(
    path: str,
    split_part: str,
    split_parts: str | None,
    num_samples: int,
    offset: int,
    shuffle: bool,
    seed: int | None,
    blend_batches: int,
    html_out: str | None,
    image_decode: str,
    split_config: str,
    dataset_config: str,
    trust_sample_loader: bool,
    as_json: bool,
) -> None:
    """Show the first samples of the dataset at PATH, decoded as the loader would see them.

    PATH is a prepared folder of tar shards, an indexed .jsonl file, or a metadataset YAML
    (each of its datasets is shown in turn, with its weight and the share of the first
    batches it really got). Samples are read in order from the split part, or drawn at
    random with --shuffle/--seed; for each one the key, shard and byte offset are shown, and
    per field its type, shape, dtype and value range, or its text. A sample that fails to
    decode is shown with its error. With --html, a page is written too: a gallery of
    thumbnails with captions, a tab per split part, the full text and stored parts of a
    sample on click. Open it in a browser to look at the data.

    \b
    Examples:
      stoker preview ./shards
      stoker preview ./shards --split-part val -n 20 --offset 100
      stoker preview ./shards --split-parts train,val,test -n 2
      stoker preview ./shards -n 50 --html preview.html
      stoker preview ./shards -n 48 --shuffle --seed 3 --split-parts train,val --html p.html
      stoker preview ./blend.yaml -n 8 --html blend.html
      stoker preview ./shards --image-decode torchrgb --json
      stoker preview ./texts.jsonl -n 3
    """
    from stoker.preview import EmptySplitError, preview_dataset, render_html
    from stoker.preview.blend import is_metadataset, preview_metadataset

    if shuffle or seed is not None:
        seed = seed or 0
    options: dict[str, Any] = {
        "num_samples": num_samples,
        "offset": offset,
        "image_decode": image_decode,
        "split_config": split_config,
        "dataset_config": dataset_config,
        "trust_sample_loader": trust_sample_loader,
        "thumbnails": html_out is not None,
        "seed": seed,
    }
    metadataset = is_metadataset(path)
    parts = [p.strip() for p in split_parts.split(",") if p.strip()] if split_parts else []
    reports: list[PreviewReport] = []
    for part in parts or [split_part]:
        try:
            if metadataset:
                found = preview_metadataset(
                    path, split_part=part, blend_batches=blend_batches, **options
                )
            else:
                found = [preview_dataset(path, split_part=part, **options)]
        except EmptySplitError:
            if not parts:
                raise
            click.echo(f"Dataset {part} is empty. Skipping.", err=True)
            continue
        for report in found:
            if not as_json:
                click.echo("\n".join(([""] if reports else []) + format_preview(report)))
            reports.append(report)
    if as_json:
        many = parts or metadataset
        echo_json([dataclasses.asdict(r) for r in reports] if many else reports[0])
    if html_out is not None:
        _write(html_out, render_html(reports))
        count = sum(len(report.samples) for report in reports)
        click.echo(f"wrote {count} samples to {html_out}", err=True)


def format_preview(report: PreviewReport) -> list[str]:
    """The human preview: a header line, then one block per sample."""
    last = report.offset + len(report.samples) - 1
    shown = f"samples {report.offset} to {last} of {report.total:,}"
    start = report.offset
    if report.seed is not None:
        shown = f"{len(report.samples)} of {report.total:,} samples drawn with seed {report.seed}"
        start = 0
    lines = [f"{report.path} [{report.split_part}]: {report.sample_type}, {shown}"]
    blend = [
        f"{k} {report.info[k]}" for k in ("weight", "repetitions", "drawn") if k in report.info
    ]
    if blend:
        lines.append("  " + ", ".join(blend))
    for position, sample in enumerate(report.samples, start=start):
        lines += ["", *_sample_lines(position, sample)]
    return lines


def _sample_lines(position: int, sample: PreviewSample) -> list[str]:
    header = (
        f"#{position} {style(sample.key, bold=True)}  "
        f"({sample.shard}, sample {sample.index}, byte offset {sample.offset})"
    )
    if sample.error is not None:
        return [header, "  " + style("error: ", fg="red") + sample.error]
    width = max((len(name) for name in sample.fields), default=0)
    rows = []
    for name, summary in sample.fields.items():
        value = summary.summary
        if summary.text is not None:
            value = f"{_one_line(summary.text)}  ({summary.summary})"
        rows.append(f"  {name:<{width}}  {value}")
    return [header, *rows]


def _one_line(text: str) -> str:
    """Text on one line: newlines and tabs shown as escapes."""
    return repr(text)[1:-1] if any(c in text for c in "\n\r\t") else text


def _write(out: str, page: str) -> None:
    try:
        Path(out).write_text(page, encoding="utf-8")
    except OSError as e:
        raise StorageError(
            f"cannot write the HTML page: {e.strerror}.",
            path=out,
            hint="Choose a writable path for --html.",
        ) from None
