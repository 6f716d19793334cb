"""``stoker prepare`` of a folder of tar shards: index (in one process or under
``--distributed``), ask what is missing, probe media, publish, and print the report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any

import click

from stoker.cli import wizard
from stoker.cli.common import echo_json, human_bytes
from stoker.cli.prepare_media import print_media_report
from stoker.format.distributed import distributed_world, on_main_rank
from stoker.format.meta import is_prepared
from stoker.format.pending import PendingPrepare, PrepareReport
from stoker.format.prepare import index_shards
from stoker.format.prepare_distributed import scan_distributed
from stoker.format.prepare_lock import PrepareLock
from stoker.format.prepare_work import PrepareWork
from stoker.media.extract import MediaFilter
from stoker.storage import open_store


@dataclasses.dataclass(frozen=True)
class PrepareOptions:
    """How the shards are indexed (the flags of ``stoker prepare`` that say so)."""

    path: str
    exclude: str | None
    tar_index_only: bool
    num_workers: int | None
    progress: bool
    overwrite: bool
    media: MediaFilter | None
    sample_index: bool
    tmp_dir: str | None


def run_prepare(
    options: PrepareOptions,
    lock: PrepareLock,
    run: Callable[[], PrepareReport],
    fix_duplicates: bool,
    distributed: bool,
    as_json: bool,
) -> PrepareReport | None:
    """Index and publish (after renaming duplicate keys if asked) under the held ``lock``; the
    report (None on ranks other than 0)."""
    path, media = options.path, options.media
    if fix_duplicates and (options.overwrite or not is_prepared(open_store(path))):
        _fix_duplicates(path, options.exclude, as_json)
    if not distributed:
        return run()
    with distributed_world() as world:
        resumed = scan_distributed(
            path,
            world,
            exclude=options.exclude,
            tar_index_only=options.tar_index_only,
            overwrite=options.overwrite,
            num_workers=options.num_workers,
            progress=options.progress,
            also=None if media is None else partial(_media_step, media),
            sample_index=options.sample_index,
            lock=lock,
        )
        report = on_main_rank(world, run)
    report.resumed_shards = resumed
    return report if world.is_main else None


def index_and_publish(
    options: PrepareOptions,
    as_json: bool,
    ratio: list[tuple[str, float]] | None,
    split_patterns: list[tuple[str, str]],
    shuffle_tars: bool,
    dataset_yaml: dict[str, Any] | None,
    dataset_yaml_name: str,
    sample_type_asked: str | None,
) -> PrepareReport:
    pending = index_shards(
        options.path,
        exclude=options.exclude,
        tar_index_only=options.tar_index_only,
        num_workers=options.num_workers,
        progress=options.progress,
        overwrite=options.overwrite,
        sample_index=options.sample_index,
        tmp_dir=options.tmp_dir,
    )
    with pending:
        if not as_json:
            _describe(pending)
        extra: dict[str, bytes] = {}
        if sample_type_asked is not None:
            with wizard.asking(pending):
                dataset_yaml, extra = wizard.ask_dataset_yaml(pending, sample_type_asked)
        if options.media is not None:  # probing media is slow: after the last question
            from stoker.media.prepare import media_into_pending

            media_report = media_into_pending(
                pending, options.media, options.num_workers, progress=options.progress
            )
            if not as_json:
                print_media_report(media_report, as_json=False)
        return pending.publish(
            split_ratio=ratio,
            split_parts=split_patterns or None,
            shuffle_seed=42 if shuffle_tars else None,
            dataset_yaml=dataset_yaml,
            dataset_yaml_name=dataset_yaml_name,
            extra_meta_files=extra,
        )


def _media_step(media: MediaFilter, work: PrepareWork) -> Callable[[str], object]:
    from stoker.media.prepare import scan_media_resumable

    return partial(scan_media_resumable, work, media)


def _fix_duplicates(path: str, exclude: str | None, as_json: bool) -> None:
    from stoker.format.fix_duplicates import fix_duplicate_keys

    report = fix_duplicate_keys(path, exclude)
    if as_json:
        return
    if report.renamed_shards:
        click.echo(
            f"{report.duplicate_keys} sample keys occurred in more than one shard (e.g. "
            f"{report.examples[0]}); renamed the members of {report.renamed_shards} shards to "
            "<shard>/<name>."
        )
    else:
        click.echo("No duplicate keys found, continuing.")


def _describe(pending: PendingPrepare) -> None:
    shards = pending.shards
    click.echo(
        f"Indexed {len(shards)} shards, {sum(pending.counts.values())} samples, "
        f"{human_bytes(pending.bytes)} ({shards[0]} ... {shards[-1]})."
    )
    click.echo(f"Parts found: {', '.join(sorted(pending.part_names)) or 'none'}.")


def print_report(report: PrepareReport, as_json: bool) -> None:
    if as_json:
        echo_json(report)
        return
    if report.tar_index_only:
        click.echo(f"Rebuilt the tar indexes of {report.shards} shards in {report.seconds:.1f} s.")
        return
    rate = report.bytes / max(report.seconds, 1e-9) / 1e9
    click.echo(f"Prepared {report.path} in {report.seconds:.2f} s ({rate:.2f} GB/s).")
    if report.resumed_shards:
        click.echo(f"Resumed {report.resumed_shards} shards indexed by an interrupted run.")
    for split in report.splits:
        click.echo(f"  {split.name:<8} {split.shards:>7} shards {split.samples:>12} samples")
    if report.dataset_yaml:
        click.echo(f"Wrote {report.dataset_yaml}.")
    else:
        click.echo("No dataset.yaml written; add one (or run again with --sample-type).")
    click.echo("Done")
