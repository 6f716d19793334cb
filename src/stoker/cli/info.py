"""``stoker info``: a summary of a prepared dataset, from its metadata alone."""

from __future__ import annotations

import json

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, human_bytes, reports_errors
from stoker.format.info import InfoReport, dataset_info
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG


@click.command(name="info", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option(
    "--split-config",
    default=DEFAULT_SPLIT_CONFIG,
    show_default=True,
    help="Split config file in .nv-meta to count the split parts of.",
)
@click.option(
    "--dataset-config",
    default=DEFAULT_DATASET_YAML,
    show_default=True,
    help="Dataset config file in .nv-meta to read the sample type from.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def command(path: str, split_config: str, dataset_config: str, as_json: bool) -> None:
    """Summarise the prepared dataset at PATH: samples, bytes, splits, sample type.

    PATH is a prepared folder of tar shards, an indexed .jsonl file, a Megatron .bin/.idx
    pair (the .bin, the .idx or their prefix) or a folder of .parquet files. Only the metadata
    (.nv-meta, .idx) is read, so this is instant even for huge datasets; `stoker lint` checks
    the metadata against the shards.

    \b
    Examples:
      stoker info ./shards
      stoker info ./shards --split-config split_small.yaml
      stoker info ./texts.jsonl --json
    """
    report = dataset_info(path, split_config=split_config, dataset_config=dataset_config)
    if as_json:
        echo_json(report)
    else:
        click.echo("\n".join(format_info(report)))


def format_info(report: InfoReport) -> list[str]:
    """The human summary: aligned ``label  value`` rows, then a table of split parts."""
    rows = [("dataset", report.path), ("samples", f"{report.samples:,}")]
    if report.kind == "jsonl":
        rows.append(("size", human_bytes(report.bytes)))
        return _aligned(rows)
    if report.kind == "binidx" and report.tokens is not None:
        rows[1] = ("sequences", f"{report.samples:,} (one sample each)")
        rows += [
            ("documents", f"{report.tokens['documents']:,}"),
            ("tokens", f"{report.tokens['tokens']:,} of {report.tokens['dtype']}"),
            ("size", human_bytes(report.bytes)),
        ]
        return _aligned(rows)
    samples = f"{report.samples:,} sample{'' if report.samples == 1 else 's'}"
    if report.kind == "parquet":
        media = report.media_columns
        columns = [f"{c} ({media[c]})" if c in media else c for c in report.columns]
        rows += [
            ("size", f"{samples} (rows), {human_bytes(report.bytes)} in {report.shards:,} files"),
            ("format", "Parquet"),
            ("columns", ", ".join(columns)),
            ("sample type", report.sample_type or "crude"),
        ]
        if report.field_map:
            rows.append(("field map", ", ".join(f"{k}: {v}" for k, v in report.field_map.items())))
        return [*_aligned(rows), "", *_split_table(report)]
    rows += [
        ("size", f"{samples}, {human_bytes(report.bytes)} in {report.shards:,} shards"),
        ("prepared by", _writer(report.writer)),
        ("index uuid", report.index_uuid or "none"),
        ("index.sqlite", "yes" if report.has_sqlite_index else "no"),
        ("sample type", report.sample_type or "none (no dataset.yaml)"),
    ]
    if report.field_map:
        rows.append(("field map", ", ".join(f"{k}: {v}" for k, v in report.field_map.items())))
    if report.subflavors:
        rows.append(("subflavors", json.dumps(report.subflavors, default=str)))
    lines = _aligned(rows)
    if report.splits:
        lines += ["", *_split_table(report)]
    return lines


def _writer(writer: str | None) -> str:
    """``7.4.1`` (Energon writes its version number) -> ``megatron-energon 7.4.1``."""
    if not writer:
        return "unknown"
    return f"megatron-energon {writer}" if writer[:1].isdigit() else writer


def _aligned(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"{label:<{width}}  {value}" for label, value in rows]


def _split_table(report: InfoReport) -> list[str]:
    """``split  shards  samples  excluded`` with right-aligned numbers."""
    header = ("split", "shards", "samples", "excluded samples")
    cells = [header] + [
        (s.name, f"{s.shards:,}", f"{s.samples:,}", f"{s.excluded_samples:,}")
        for s in report.splits
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        f"{row[0]:<{widths[0]}}  "
        + "  ".join(f"{cell:>{width}}" for cell, width in zip(row[1:], widths[1:], strict=True))
        for row in cells
    ]
