"""``stoker lint``: check a prepared dataset; exit status 1 when it has errors."""

from __future__ import annotations

import sys

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors, style
from stoker.format.lint import Finding, LintReport, lint_dataset
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG

_COLOURS = {"error": "red", "warning": "yellow"}


@click.command(name="lint", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option(
    "--split-config",
    default=DEFAULT_SPLIT_CONFIG,
    show_default=True,
    help="Split config file in .nv-meta to check.",
)
@click.option(
    "--dataset-config",
    "--dataset-yaml",
    "dataset_yaml",
    default=DEFAULT_DATASET_YAML,
    show_default=True,
    help="Dataset config file in .nv-meta to check (as get_*_dataset's dataset_config).",
)
@click.option(
    "--split-parts",
    metavar="PARTS",
    help="Check only these split parts, comma-separated (e.g. 'train,val') (Energon's lint "
    "--split-parts).",
)
@click.option(
    "--decode/--no-decode",
    default=True,
    show_default=True,
    help="Decode every sample as the loader would (images, video/audio headers, JSON, text); "
    "--no-decode: only the fast structural check.",
)
@click.option(
    "--trust-sample-loader",
    is_flag=True,
    help="Run the sample_loader.py that dataset.yaml names when decoding.",
)
@click.option(
    "--parallel",
    "--num-workers",
    "num_workers",
    type=click.IntRange(1),
    help="Processes that scan and decode shards, or check the parts of a .jsonl file "
    "(default: the CPU count, at most 16; --parallel is Energon's name).",
)
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Show a progress bar over the shards, or the MiB of a .jsonl file (on stderr).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def command(
    path: str,
    split_config: str,
    dataset_yaml: str,
    split_parts: str | None,
    decode: bool,
    trust_sample_loader: bool,
    num_workers: int | None,
    progress: bool,
    as_json: bool,
) -> None:
    """Check the prepared dataset at PATH and list every problem found.

    Every shard is re-scanned (tar headers only) and compared with its .tar.idx, .info.json
    and index.sqlite; split.yaml and dataset.yaml are checked against the shards. For a .jsonl
    file, every line must be a JSON object (checked in parts of 16 MiB over the processes)
    and its .idx must be up to date.

    Each problem is one line naming the file, sample key and byte offset. Exit status: 0 when
    there are no errors (warnings allowed), 1 when there are errors, 2 when PATH is not a
    prepared dataset.

    Then every sample is decoded and mapped as the loader does, in parallel processes
    (finds corrupt images, unreadable video headers, bad JSON and field maps that fail on some
    samples); each failing sample is named with its shard, key and byte offset. --no-decode
    skips this for a fast structural check. With --split-parts, only the shards of those split
    parts are checked.

    \b
    Examples:
      stoker lint ./shards
      stoker lint ./shards --no-decode                 # headers and metadata only
      stoker lint ./shards --split-parts train,val
      stoker lint ./shards --parallel 32 --json > lint.json
      stoker lint ./texts.jsonl
    """
    parts = [p.strip() for p in split_parts.split(",") if p.strip()] if split_parts else None
    report = lint_dataset(
        path,
        split_config=split_config,
        dataset_yaml=dataset_yaml,
        progress=progress and not as_json,
        num_workers=num_workers,
        split_parts=parts,
    )
    # a Parquet lint reads every group
    if decode and report.kind not in ("jsonl", "binidx", "parquet"):
        show = progress and not as_json
        options = (split_config, dataset_yaml, trust_sample_loader, num_workers)
        _decode(path, parts, *options, report, progress=show)
    if as_json:
        echo_json(report.to_dict())
    else:
        for finding in report.findings:
            click.echo(format_finding(finding))
        click.echo(summary(report))
    sys.exit(0 if report.ok else 1)


def _decode(
    path: str,
    parts: list[str] | None,
    split_config: str,
    dataset_yaml: str,
    trust: bool,
    num_workers: int | None,
    report: LintReport,
    progress: bool = False,
) -> None:
    """Decode every sample (after clean structural checks) into ``report``."""
    if not report.ok:
        problem = "the samples were not decoded: fix the errors above first."
        report.findings.append(Finding("warning", problem))
        return
    try:
        from stoker.preview.lint_decode import decode_samples
    except ImportError as e:  # decoding needs torch, as the loader does
        problem = f"the samples cannot be decoded here ({e})."
        hint = (
            "Install the loader's extras: pip install 'stoker[torch,image]', or pass --no-decode."
        )
        report.findings.append(Finding("error", problem, hint=hint))
        return
    decoded = decode_samples(
        path,
        split_parts=parts,
        split_config=split_config,
        dataset_config=dataset_yaml,
        trust_sample_loader=trust,
        num_workers=num_workers,
        progress=progress,
    )
    report.samples_decoded = decoded.checked
    report.findings.extend(decoded.findings)


def format_finding(finding: Finding) -> str:
    """``error: shard.tar, sample 'k', byte offset N: problem. hint``."""
    label = style(f"{finding.severity}:", fg=_COLOURS[finding.severity], bold=True)
    return f"{label} {finding.message}"


def summary(report: LintReport) -> str:
    """``checked 20 shards, 20000 samples: no problems`` (or the error and warning counts)."""
    if report.kind in ("jsonl", "binidx"):
        checked = f"checked {report.path}, {report.samples_checked} samples"
    else:
        unit = "files" if report.kind == "parquet" else "shards"
        checked = f"checked {report.shards_checked} {unit}, {report.samples_checked} samples"
        if report.samples_decoded:
            checked += f" ({report.samples_decoded} decoded)"
    if not report.findings:
        return f"{checked}: no problems"
    counts = [_plural(report.errors, "error"), _plural(report.warnings, "warning")]
    return f"{checked}: {', '.join(counts)}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
