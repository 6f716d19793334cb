"""``stoker bench``: samples/s, first batch, memory and data wait at several worker counts.

Thin: options in, :mod:`stoker.preview.bench` measures, :mod:`stoker.preview.bench_report` and
:mod:`stoker.preview.bench_html` print and write. torch is imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors
from stoker.errors import StorageError


@click.command(name="bench", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option(
    "--workers", default="0,2,4", show_default=True, help="Worker counts to try, comma-separated."
)
@click.option(
    "--batch-size", type=click.IntRange(1), default=16, show_default=True, help="Samples per batch."
)
@click.option(
    "--batches", type=click.IntRange(1), default=50, show_default=True, help="Batches per setting."
)
@click.option(
    "--seconds", type=click.FloatRange(0, min_open=True), help="Measure each setting this long."
)
@click.option(
    "--consumer-ms",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="Simulated training step per batch (ms), so the data-wait figure means something.",
)
@click.option(
    "--hold",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Batches the simulated loop keeps while it asks for the next, as yours does (1: a plain "
    "loop; 2: it keeps the previous batch; 4: gradient accumulation over 4).",
)
@click.option(
    "--task-encoder",
    metavar="MODULE:CLASS",
    help="Your task encoder, imported from this directory or PYTHONPATH (default: stoker's).",
)
@click.option("--image-decode", help="Image mode of the decoder (torchrgb8, torchrgb, pil...).")
@click.option("--av-decode", help="AV decoder (AVDecoder, torch, pyav).")
@click.option("--split-part", default="train", show_default=True, help="Split part to load.")
@click.option(
    "--shuffle-buffer-size",
    type=click.IntRange(0),
    default=100,
    show_default=True,
    help="As get_train_dataset's (0: no shuffling).",
)
@click.option(
    "--max-samples-per-sequence",
    type=click.IntRange(1),
    default=100,
    show_default=True,
    help="As get_train_dataset's.",
)
@click.option(
    "--prefetch-factor",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="Batches each worker keeps ready (the loader's prefetch_factor).",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False),
    help="Also write a self-contained HTML report with plots here.",
)
@click.option(
    "--worker-types",
    default="",
    help="Worker types to compare at each count, comma-separated: fork, spawn, thread, main "
    "(default: the loader's, processes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@reports_errors
def command(
    path: str,
    workers: str,
    batch_size: int,
    batches: int,
    seconds: float | None,
    consumer_ms: float,
    hold: int,
    task_encoder: str | None,
    image_decode: str | None,
    av_decode: str | None,
    split_part: str,
    shuffle_buffer_size: int,
    max_samples_per_sequence: int,
    prefetch_factor: int,
    html_out: str | None,
    worker_types: str,
    as_json: bool,
) -> None:
    """Load PATH as training would, at each worker count, and recommend num_workers.

    PATH is a prepared dataset folder, a metadataset YAML or a URL (s3://, https://...). Each
    worker count gets a fresh loader; the first batch is timed on its own, then --batches
    batches (or --seconds) are loaded while a simulated training step sleeps --consumer-ms per
    batch. Shown per setting: samples/s, time to the first batch, peak memory of the process
    tree, the share of time spent waiting in next(), and the bottleneck (the slowest stage
    when the loader reports stats, else 'loader' or 'training step').

    \b
    Examples:
      stoker bench ./shards
      stoker bench ./shards --workers 0,2,4,8 --batch-size 32 --consumer-ms 40
      stoker bench blend.yaml --task-encoder my_project.data:MyEncoder --seconds 10
      stoker bench ./shards --image-decode torchrgb8 --html bench.html --json
      stoker bench ./shards --image-decode torchrgb8 --hold 2 --consumer-ms 40
      stoker bench ./shards --workers 2 --worker-types fork,thread
    """
    from stoker.preview.bench import BenchSettings, run_bench
    from stoker.preview.bench_report import format_report, report_data
    from stoker.preview.bench_settings import parse_worker_types, parse_workers

    settings = BenchSettings(
        path=path,
        workers=parse_workers(workers),
        batch_size=batch_size,
        batches=batches,
        seconds=seconds,
        consumer_ms=consumer_ms,
        hold=hold,
        task_encoder=task_encoder,
        image_decode=image_decode,
        av_decode=av_decode,
        split_part=split_part,
        shuffle_buffer_size=shuffle_buffer_size,
        max_samples_per_sequence=max_samples_per_sequence,
        prefetch_factor=prefetch_factor,
        worker_types=parse_worker_types(worker_types),
    )
    settings.check()
    report = run_bench(settings)
    if as_json:
        echo_json(report_data(report))
    else:
        click.echo("\n".join(format_report(report)))
    if html_out is not None:
        from stoker.preview.bench_html import render_bench_html

        page = render_bench_html(report)
        try:
            Path(html_out).write_text(page, encoding="utf-8")
        except OSError as e:
            raise StorageError(
                f"cannot write the report: {e.strerror}.",
                path=html_out,
                hint="Choose a writable path for --html.",
            ) from None
        click.echo(f"wrote the report to {html_out}", err=True)
