"""``stoker prepare``: Energon's verb and flags, interactive or not.

This module reads the flags and asks what is missing; :mod:`stoker.cli.prepare_run` indexes a
folder of shards, :mod:`stoker.cli.prepare_kinds` prepares the other kinds of PATH."""

from __future__ import annotations

import contextlib
import os

import click

from stoker.cli import wizard
from stoker.cli.common import CONTEXT_SETTINGS, reports_errors
from stoker.cli.prepare_kinds import prepare_other_kind
from stoker.cli.prepare_media import media_options
from stoker.cli.prepare_run import PrepareOptions, index_and_publish, print_report, run_prepare
from stoker.errors import AlreadyPreparedError, ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.meta import DEFAULT_DATASET_YAML, is_prepared
from stoker.format.pending import PrepareReport
from stoker.format.prepare_lock import PrepareLock
from stoker.format.splits import compile_split_patterns, parse_split_ratio
from stoker.media.extract import MediaFilter
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
    other = prepare_other_kind(
        path, progress and not as_json, as_json, allow_module, sample_type, field_map,
        dataset_yaml_name,
    )  # fmt: skip
    if other:
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
    options = PrepareOptions(
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
        return index_and_publish(
            options, as_json, ratio, split_patterns, shuffle_tars, dataset_yaml,
            dataset_yaml_name, sample_type_asked,
        )  # fmt: skip

    # one prepare at a time per dataset; under --distributed taken by rank 0 only
    lock = PrepareLock(open_store(path))
    with contextlib.closing(lock):
        if not distributed:
            lock.acquire()
        report = run_prepare(options, lock, run, fix_duplicates, distributed, as_json)
    if report is not None:
        print_report(report, as_json)


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
