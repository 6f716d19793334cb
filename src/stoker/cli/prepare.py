"""``stoker prepare``: Energon's verb and flags, interactive or not."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import click

from stoker.cli import wizard
from stoker.cli.common import CONTEXT_SETTINGS, echo_json, human_bytes, reports_errors
from stoker.cli.prepare_media import media_options, print_media_report
from stoker.errors import AlreadyPreparedError, ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.distributed import distributed_world, on_main_rank
from stoker.format.jsonl import prepare_jsonl
from stoker.format.meta import DEFAULT_DATASET_YAML, is_prepared
from stoker.format.parquet import is_parquet_dataset, prepare_parquet
from stoker.format.prepare import PendingPrepare, PrepareReport, index_shards
from stoker.format.prepare_distributed import scan_distributed
from stoker.format.prepare_lock import PrepareLock
from stoker.format.prepare_work import PrepareWork
from stoker.format.splits import compile_split_patterns, parse_split_ratio
from stoker.media.extract import MediaFilter
from stoker.metadataset import is_metadataset
from stoker.sources.joins import JoinReport, prepare_joins
from stoker.storage import open_store


@click.command(name="prepare", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option("--split-ratio", help="train,val,test ratio, e.g. '8,1,1' or '0.8,0.1,0.1'.")
@click.option(
    "--split-parts",
    multiple=True,
    metavar="NAME:PATTERN",
    help="Assign shards by pattern instead of ratio, e.g. 'train:train/{000..099}.tar' "
    "(repeatable; regex matched at the start of the shard path, braces expanded).",
)
@click.option("--exclude", metavar="REGEX", help="Skip shard paths matching this regex.")
@click.option("--shuffle-tars", is_flag=True, help="Shuffle shards before splitting by ratio.")
@click.option("--tar-index-only", is_flag=True, help="Only (re)build .tar.idx and index.sqlite.")
@click.option("--sample-type", help="Sample type for dataset.yaml, e.g. CaptioningSample.")
@click.option("--field-map", metavar="JSON", help='Part per field, e.g. \'{"image": "jpg"}\'.')
@click.option("--skip-dataset-yaml", is_flag=True, help="Do not write a dataset.yaml.")
@click.option("--dataset-yaml-name", default=DEFAULT_DATASET_YAML, show_default=True)
@click.option("--non-interactive", is_flag=True, help="Never ask; fail if something is missing.")
@click.option("--force-overwrite", is_flag=True, help="Prepare again an already prepared dataset.")
@click.option("--num-workers", type=click.IntRange(1), help="Shard-indexing processes.")
@click.option(
    "--fix-duplicates",
    is_flag=True,
    help="If a sample key occurs in more than one shard, rename every shard's members to "
    "<shard path>/<name> in place first, which makes keys unique (Energon's flag; local "
    "datasets).",
)
@click.option(
    "--tmp-path",
    type=click.Path(file_okay=False),
    help="When PATH is remote (e.g. S3): the local folder where index.sqlite is built before "
    "upload (default: the system's temporary folder; the file is removed afterwards).",
)
@media_options
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.option(
    "--allow-module",
    multiple=True,
    metavar="MODULE",
    help="Metadataset: a module whose sample types the joined datasets' dataset.yaml may name.",
)
@click.option(
    "--no-sample-index",
    "--no-sample-tables",
    "no_sample_index",
    is_flag=True,
    help="Skip index.sqlite (faster at 10^9 samples): loading needs only the .tar.idx files; "
    "joins, aux datasets and media metadata need the index. --no-sample-tables: Energon's name.",
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Share the shards among the ranks of a torchrun or srun job (gloo); rank 0 publishes.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@reports_errors
def command(
    path: str,
    split_ratio: str | None,
    split_parts: tuple[str, ...],
    exclude: str | None,
    shuffle_tars: bool,
    tar_index_only: bool,
    sample_type: str | None,
    field_map: str | None,
    skip_dataset_yaml: bool,
    dataset_yaml_name: str,
    non_interactive: bool,
    force_overwrite: bool,
    num_workers: int | None,
    fix_duplicates: bool,
    tmp_path: str | None,
    by_extension: bool,
    by_glob: str | None,
    by_header: bool,
    progress: bool,
    allow_module: tuple[str, ...],
    no_sample_index: bool,
    distributed: bool,
    as_json: bool,
) -> None:
    """Index the shards of the dataset at PATH and write its .nv-meta files.

    PATH is a folder of WebDataset tar shards, or a .jsonl file (which gets a .jsonl.idx), or a
    metadataset YAML: then the join index of each of its joins is built (next to it, in
    <yaml>.cache/), so that loading does not build them again.
    Everything is written under temporary names and moved into place at the end, so an
    interrupted or failed prepare leaves the dataset as it was; each finished shard is kept in
    .nv-meta/.stoker-work, so running the command again skips it. Without --non-interactive,
    missing choices (split, sample type, field map) are asked for.

    \b
    Examples:
      stoker prepare ./shards                       # asks for split and sample type
      stoker prepare ./shards --non-interactive --split-ratio 8,1,1 \\
          --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
      stoker prepare ./clips --non-interactive --split-ratio 1,0,0 \\
          --sample-type VidQASample --field-map '{"video": "mp4", "context": "txt"}' \\
          --media-metadata-by-extension             # also stores fps, duration, ...
      stoker prepare ./texts.jsonl
      stoker prepare ./joined.yaml                  # builds the join indexes
      torchrun --nnodes 8 --nproc-per-node 8 ... -m stoker.cli prepare ./shards \\
          --distributed --split-ratio 8,1,1       # 64 ranks share the shards
    """
    if is_metadataset(path):
        reports = prepare_joins(
            path, progress=progress and not as_json, allowed_modules=allow_module
        )
        _print_joins(path, reports, as_json)
        return
    if path.endswith(".jsonl"):
        samples, size = prepare_jsonl(path, progress=progress and not as_json)
        if as_json:
            echo_json({"path": path, "samples": samples, "bytes": size})
        else:
            click.echo(f"Done. Found {samples} samples ({human_bytes(size)}) in {path}.")
        return
    if is_parquet_dataset(open_store(path)):
        _prepare_parquet(path, sample_type, field_map, dataset_yaml_name, as_json)
        return
    media = _media_filter(by_extension, by_glob, by_header)
    if media is not None and no_sample_index:
        raise ConfigError(
            "--media-metadata-by-* stores the metadata in index.sqlite, which --no-sample-index "
            "leaves out.",
            hint="Leave out one of the two flags.",
        )
    interactive = not non_interactive and not as_json and not distributed
    split_patterns = [_parse_split_part(item) for item in split_parts]
    compile_split_patterns(split_patterns)  # a bad regex fails before indexing
    ratio = parse_split_ratio(split_ratio) if split_ratio else None
    dataset_yaml = None
    if sample_type is not None and not skip_dataset_yaml:
        dataset_yaml = make_dataset_yaml(sample_type, field_map)
    elif field_map is not None:
        raise ConfigError("--field-map needs --sample-type.")
    if distributed and not tar_index_only and ratio is None and not split_patterns:
        raise ConfigError("--distributed needs --split-ratio or --split-parts.")
    needs_yaml = dataset_yaml is None and interactive and not skip_dataset_yaml
    needs_yaml = needs_yaml and not tar_index_only
    sample_type_asked = None
    if interactive:
        wizard.check_folder(path)  # a wrong path fails before the questions, not after
    with wizard.asking():  # questions that need no data come before any work
        overwrite = force_overwrite or (interactive and _confirm_overwrite(path))
        if not tar_index_only and ratio is None and not split_patterns:
            if not interactive:
                raise ConfigError(
                    "--split-ratio or --split-parts is required with --non-interactive.",
                    hint="E.g. --split-ratio 8,1,1 (train,val,test).",
                )
            ratio = parse_split_ratio(wizard.ask_split_ratio())
        if needs_yaml:
            sample_type_asked = wizard.ask_sample_type()
    if fix_duplicates and distributed:
        raise ConfigError(
            "--fix-duplicates rewrites shards in place and runs in one process.",
            hint="Run `stoker prepare PATH --fix-duplicates` once without --distributed first.",
        )
    options = _Options(
        path,
        exclude,
        tar_index_only,
        num_workers,
        progress and not as_json,
        overwrite,
        media,
        not no_sample_index,
        tmp_path,
    )

    def run() -> PrepareReport:
        return _index_and_publish(
            options, as_json, ratio, split_patterns, shuffle_tars, dataset_yaml,
            dataset_yaml_name, sample_type_asked,
        )  # fmt: skip

    # one prepare at a time per dataset; under --distributed taken by rank 0 only
    lock = PrepareLock(open_store(path))
    with contextlib.closing(lock):
        if not distributed:
            lock.acquire()
        report = _run(options, lock, run, fix_duplicates, distributed, as_json)
    if report is not None:
        _print_report(report, as_json)


def _run(
    options: _Options,
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


@dataclasses.dataclass(frozen=True)
class _Options:
    path: str
    exclude: str | None
    tar_index_only: bool
    num_workers: int | None
    progress: bool
    overwrite: bool
    media: MediaFilter | None
    sample_index: bool
    tmp_dir: str | None


def _index_and_publish(
    options: _Options,
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


def _prepare_parquet(
    path: str, sample_type: str | None, field_map: str | None, yaml_name: str, as_json: bool
) -> None:
    """A Parquet folder: check its files, write the dataset.yaml of --sample-type if given."""
    if field_map is not None and sample_type is None:
        raise ConfigError("--field-map needs --sample-type.")
    dataset_yaml = make_dataset_yaml(sample_type, field_map) if sample_type else None
    report = prepare_parquet(path, dataset_yaml, yaml_name)
    if as_json:
        echo_json(report)
        return
    splits = ", ".join(f"{name} {rows} rows" for name, rows in report.splits.items())
    click.echo(f"Parquet dataset {path}: {report.files} files, {splits}.")
    if report.dataset_yaml:
        click.echo(f"Wrote {report.dataset_yaml}.")
    click.echo("Done")


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


def _print_joins(path: str, reports: list[JoinReport], as_json: bool) -> None:
    if as_json:
        echo_json([dataclasses.asdict(r) for r in reports])
        return
    if not reports:
        click.echo(f"{path} has no joins; nothing to prepare.")
    for r in reports:
        state = "up to date" if r.up_to_date else f"built in {r.seconds:.2f} s"
        matched = ", ".join(f"{n}/{r.samples}" for n in r.matched)
        click.echo(f"  {r.split:<8} join of {len(r.datasets)} datasets: {state}, matched {matched}")
        click.echo(f"           {r.path or '(in memory: the metadataset is not a local file)'}")


def _media_filter(by_extension: bool, by_glob: str | None, by_header: bool) -> MediaFilter | None:
    if not (by_extension or by_glob or by_header):
        return None
    return MediaFilter.parse(glob=by_glob, header=by_header, extension=by_extension)


def _parse_split_part(item: str) -> tuple[str, str]:
    name, sep, pattern = item.partition(":")
    if not sep or not name or not pattern:
        raise ConfigError(
            f"invalid --split-parts {item!r}.", hint="Use NAME:PATTERN, e.g. 'val:val/.*'."
        )
    return name, pattern


def _confirm_overwrite(path: str) -> bool:
    if "://" not in path and not os.path.isdir(path):
        return False
    if not is_prepared(open_store(path)):
        return False
    if click.confirm("The dataset is already prepared. Prepare it again?", default=False):
        return True
    raise AlreadyPreparedError("the dataset is already prepared; nothing was changed.", path=path)


def _describe(pending: PendingPrepare) -> None:
    shards = pending.shards
    click.echo(
        f"Indexed {len(shards)} shards, {sum(pending.counts.values())} samples, "
        f"{human_bytes(pending.bytes)} ({shards[0]} ... {shards[-1]})."
    )
    click.echo(f"Parts found: {', '.join(sorted(pending.part_names)) or 'none'}.")


def _print_report(report: PrepareReport, as_json: bool) -> None:
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
