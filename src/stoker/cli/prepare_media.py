"""``stoker prepare-media``: store media metadata of a prepared dataset in its index.sqlite."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors

F = Callable[..., Any]


def media_options(func: F) -> F:
    """The ``--media-metadata-by-*`` flags, shared with ``stoker prepare``."""
    options = (
        click.option(
            "--media-metadata-by-extension",
            "by_extension",
            is_flag=True,
            help="Probe files whose extension is an image, video or audio format "
            "(jpg png webp ... mp4 mkv webm avi mov ... wav flac mp3 ogg m4a aac).",
        ),
        click.option(
            "--media-metadata-by-glob",
            "by_glob",
            metavar="PATTERNS",
            help="Probe members whose name matches a glob, e.g. '*.mp4' or '*.mp4,*.jpg'.",
        ),
        click.option(
            "--media-metadata-by-header",
            "by_header",
            is_flag=True,
            help="Probe every member whose first bytes are a known image/video/audio header "
            "(reads a few bytes of every member).",
        ),
    )
    for option in reversed(options):
        func = option(func)
    return func


@click.command(name="prepare-media", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@media_options
@click.option("--num-workers", type=click.IntRange(1), help="Shard-probing processes.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def command(
    path: str,
    by_extension: bool,
    by_glob: str | None,
    by_header: bool,
    num_workers: int | None,
    progress: bool,
    as_json: bool,
) -> None:
    """Store the metadata of the media files of the prepared dataset (or plain folder) at PATH.

    Images get width, height, format and mode; video and audio get duration, frame count,
    fps, frame size, audio sample rate, channels and sample count. The records go into the
    media_metadata table of .nv-meta/index.sqlite (Energon's schema, so `energon` reads them
    too), replacing earlier ones. Shards are probed in parallel; the index is rewritten under a
    temporary name and swapped in at the end, so an interrupted run changes nothing. Files that
    cannot be probed (corrupt, unsupported codec) are reported and skipped.

    PATH may also be a plain folder of media files (one used as a filesystem:// aux source in a
    metadataset): the records then go into PATH/.nv-meta/index.sqlite, keyed by the path
    relative to PATH, as Energon's prepare-media writes them.

    Task encoders read the records with sample.get_media_metadata("mp4") or
    stoker.get_media_metadata(path, "key.mp4"), e.g. to group clips by duration
    without decoding them. Choose exactly one --media-metadata-by-* flag.

    \b
    Examples:
      stoker prepare-media ./clips --media-metadata-by-extension
      stoker prepare-media ./clips --media-metadata-by-glob '*.mp4,*.wav'
      stoker prepare-media ./raw_videos --media-metadata-by-extension   # a plain folder
      stoker prepare ./clips --non-interactive --split-ratio 1,0,0 --media-metadata-by-header
    """
    from stoker.media.extract import MediaFilter
    from stoker.media.prepare import prepare_media

    media = MediaFilter.parse(glob=by_glob, header=by_header, extension=by_extension)
    report = prepare_media(path, media, num_workers=num_workers, progress=progress and not as_json)
    print_media_report(report, as_json)
    if not as_json:
        click.echo("Done")


def print_media_report(report: Any, as_json: bool) -> None:
    """Print a :class:`stoker.media.prepare.MediaReport`."""
    if as_json:
        echo_json(report)
        return
    source = f"{report.shards} shards" if report.shards else "the folder"
    click.echo(
        f"Stored metadata of {report.files} media files from {source} "
        f"({report.strategy.lower()} filter) in {report.seconds:.2f} s."
    )
    if report.failed:
        click.echo(f"{report.failed} files could not be probed and were skipped:", err=True)
        for name, why in report.failures:
            click.echo(f"  {name}: {why}", err=True)
