"""``stoker pack``: a thin adapter over :func:`stoker.format.pack.pack` (and ``prepare``)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, human_bytes, reports_errors
from stoker.format.distributed import init_distributed
from stoker.format.pack import PackReport, pack
from stoker.format.pack.parquet_rows import (
    check_field_map,
    is_parquet_source,
    parquet_columns,
    part_field_map,
)

if TYPE_CHECKING:
    from stoker.format.pending import PrepareReport

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt])(i?)b?|b)?\s*$", re.IGNORECASE)
_SKIPPED_SHOWN = 5


class SizeParam(click.ParamType):  # type: ignore[type-arg]  # generic only in click>=8.2
    """A byte size: ``1000000``, ``500MB`` or ``500M`` (10^6 each), ``1GiB`` (2^30), ``1.5GB``."""

    name = "SIZE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        match = _SIZE_RE.match(str(value))
        if match is None:
            self.fail(f"{value!r} is not a size; write e.g. 1000000, 500MB or 1GiB.", param, ctx)
        number, unit, binary = match.groups()
        power = "kmgt".index(unit.lower()) + 1 if unit else 0
        return int(float(number) * (1024 if binary else 1000) ** power)


def _split_parts(values: tuple[str, ...]) -> list[tuple[str, str]]:
    parts = []
    for value in values:
        name, sep, pattern = value.partition(":")
        if not sep or not name or not pattern:
            raise click.BadParameter(
                f"{value!r} is not NAME:PATTERN, e.g. 'train:shard-00{{0000..0008}}.tar'.",
                param_hint="--split-parts",
            )
        parts.append((name, pattern))
    return parts


def _dataset_yaml(sample_type: str | None, field_map: str | None) -> dict[str, Any] | None:
    if sample_type is None:
        if field_map is not None:
            raise click.UsageError("--field-map needs --sample-type.")
        return None
    from stoker.format.dataset_config import make_dataset_yaml

    return make_dataset_yaml(sample_type, field_map)


@dataclasses.dataclass(frozen=True)
class _PrepareArgs:
    """The --prepare flags, checked before packing so that a typo does not waste a pack."""

    split_ratio: list[tuple[str, float]] | None
    split_parts: list[tuple[str, str]] | None
    dataset_yaml: dict[str, Any] | None
    num_workers: int | None
    sample_index: bool = True


def _prepare_args(prepare: bool, flags: Mapping[str, Any]) -> _PrepareArgs | None:
    used = [
        f"--{name.replace('_', '-')}" for name, value in flags.items() if value not in (None, ())
    ]
    if not prepare:
        if used:
            raise click.UsageError(f"{', '.join(used)}: only used with --prepare; add --prepare.")
        return None
    from stoker.format.splits import compile_split_patterns, parse_split_ratio

    parts = _split_parts(flags["split_parts"])
    compile_split_patterns(parts)  # a bad regex fails before packing
    if parts and flags["split_ratio"]:
        raise click.UsageError("give either --split-ratio or --split-parts, not both.")
    ratio = None if parts else parse_split_ratio(flags["split_ratio"] or "1,0,0")
    dataset_yaml = _dataset_yaml(flags["sample_type"], flags["field_map"])
    return _PrepareArgs(
        ratio,
        parts or None,
        dataset_yaml,
        flags["num_workers"],
        sample_index=not flags.get("no_sample_index"),
    )


def _run_prepare(
    out: str, args: _PrepareArgs, shuffle: bool, seed: int, progress: bool, distributed: bool
) -> PrepareReport:
    from stoker.format.prepare import prepare_dataset
    from stoker.format.prepare_distributed import prepare_dataset_distributed

    run = prepare_dataset_distributed if distributed else prepare_dataset
    return run(
        out,
        split_ratio=args.split_ratio,
        split_parts=args.split_parts,
        shuffle_tars=shuffle,
        shuffle_seed=seed,
        num_workers=args.num_workers,
        overwrite=True,
        dataset_yaml=args.dataset_yaml,
        progress=progress,
        sample_index=args.sample_index,
    )


def _print_summary(report: PackReport, prepared: PrepareReport | None) -> None:
    click.echo(
        f"Packed {report.samples:,} samples (parts: {', '.join(report.part_names)}) into "
        f"{len(report.shards)} shard(s), {human_bytes(report.bytes)}, in {report.out} "
        f"({report.seconds:.1f} s)."
    )
    if report.skipped:
        click.echo(f"Skipped {len(report.skipped)} file(s):")
        for skipped in report.skipped[:_SKIPPED_SHOWN]:
            click.echo(f"  {skipped.path}: {skipped.reason}")
        if len(report.skipped) > _SKIPPED_SHOWN:
            click.echo(f"  ... and {len(report.skipped) - _SKIPPED_SHOWN} more (--json lists all).")
    if prepared is not None:
        splits = ", ".join(
            f"{s.name} {s.shards} shard(s), {s.samples:,} sample(s)" for s in prepared.splits
        )
        click.echo(f"Prepared {prepared.path}: {splits or 'indexed'} ({prepared.seconds:.1f} s).")
        if prepared.dataset_yaml:
            click.echo(f"Wrote {prepared.dataset_yaml}.")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("src", type=click.Path(exists=True))
@click.argument("out", type=click.Path(file_okay=False))
@click.option(
    "--samples-per-shard",
    type=click.IntRange(min=1),
    help="Close a shard after this many samples. [default: 1000 when --max-shard-bytes is not "
    "given either]",
)
@click.option(
    "--max-shard-bytes",
    type=SizeParam(),
    help="Close a shard before it would grow past this size, e.g. 500MB, 1GiB or 1000000. "
    "A sample larger than this gets a shard of its own. Combines with --samples-per-shard: "
    "whichever limit is reached first closes the shard.",
)
@click.option("--shuffle", is_flag=True, help="Shuffle the order of samples (by --seed).")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of --shuffle: same seed, same order.",
)
@click.option(
    "--shard-prefix",
    default="shard-",
    show_default=True,
    help="Shard file names are PREFIX000000.tar, PREFIX000001.tar, ...",
)
@click.option(
    "--force-overwrite",
    is_flag=True,
    help="Replace the shards an earlier `stoker pack` wrote in OUT (listed in "
    "OUT/.stoker-pack-manifest.json; also their .tar.idx files and .nv-meta) instead of "
    "stopping. Files pack did not write are never removed.",
)
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="Show progress bars on stderr.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of text.")
@click.option(
    "--prepare",
    is_flag=True,
    help="Then prepare OUT for loading, as `stoker prepare` does (index, splits, dataset.yaml).",
)
@click.option(
    "--split-ratio",
    help="With --prepare: train,val,test shard ratios, e.g. 8,1,1, or named parts, e.g. "
    "train=0.9,val=0.1. [default: 1,0,0]",
)
@click.option(
    "--split-parts",
    multiple=True,
    metavar="NAME:PATTERN",
    help="With --prepare: put the shards matching a (brace-expanded) pattern into a split, e.g. "
    "'val:shard-00000{0..1}.tar'. Repeat per split; replaces --split-ratio.",
)
@click.option(
    "--sample-type",
    help="With --prepare: write .nv-meta/dataset.yaml for this sample type, e.g. "
    "CaptioningSample, VQASample, TextSample, or CrudeWebdataset.",
)
@click.option(
    "--field-map",
    help="With --sample-type: JSON mapping of sample fields to part names, e.g. "
    '\'{"image": "jpg", "caption": "txt"}\'.',
)
@click.option(
    "--num-workers",
    type=click.IntRange(min=1),
    help="With --prepare: processes that index shards. [default: CPU count, at most 16]",
)
@click.option(
    "--no-sample-index",
    is_flag=True,
    help="With --prepare: build no .nv-meta/index.sqlite (key lookup). Loading needs only the "
    ".tar.idx files; joins, aux datasets, media metadata and restore_sample need the index.",
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Share the shards (and --prepare's indexing) among the ranks of a torchrun or srun job.",
)
@reports_errors
def command(
    src: str,
    out: str,
    samples_per_shard: int | None,
    max_shard_bytes: int | None,
    shuffle: bool,
    seed: int,
    shard_prefix: str,
    force_overwrite: bool,
    progress: bool,
    as_json: bool,
    prepare: bool,
    split_ratio: str | None,
    split_parts: tuple[str, ...],
    sample_type: str | None,
    field_map: str | None,
    num_workers: int | None,
    no_sample_index: bool,
    distributed: bool,
) -> None:
    """Turn a folder of files, a JSONL file, or Parquet files into WebDataset tar shards in OUT.

    SRC is a folder, walked recursively in sorted order: files that share a name up to the first
    dot form one sample (sub/0001.jpg + sub/0001.txt -> key sub/0001, parts jpg and txt). Hidden
    files and files without an extension are skipped and listed. SRC may instead be a .jsonl
    file: each non-blank line becomes a sample with one part, json, keyed by its line number
    (line 42 -> 00000042). SRC may also be a .parquet file or a folder of them: each row becomes
    a sample keyed by its row number, each column a part (image.jpg for an image column's
    bytes, text.txt for a string, n.json for other values); there --field-map names columns,
    as `stoker prepare` takes it for Parquet (e.g. '{"image": "image", "caption": "text"}').

    Shards are written as OUT/shard-000000.tar, ...; the same input gives the same bytes. Nothing
    in OUT changes unless every shard was written. With --prepare, OUT is then prepared for
    loading in the same command.

    \b
    Examples:
      stoker pack ./images ./shards --max-shard-bytes 1GiB
      stoker pack ./texts.jsonl ./shards --samples-per-shard 10000 --shuffle --seed 1
      stoker pack ./coco ./coco-wds --prepare --split-ratio 8,1,1 \\
          --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
      stoker pack ./hf-parquet ./wds --prepare --sample-type CaptioningSample \\
          --field-map '{"image": "image", "caption": "text"}'
      torchrun --nproc-per-node 8 -m stoker.cli pack ./raw ./shards --distributed --prepare
    """
    flags: dict[str, Any] = {"split_ratio": split_ratio, "split_parts": split_parts}
    flags |= {"sample_type": sample_type, "field_map": field_map, "num_workers": num_workers}
    flags["no_sample_index"] = no_sample_index or None  # a flag: None when not given
    prepare_args = _prepare_args(prepare, flags)
    parquet = prepare_args is not None and bool(field_map) and is_parquet_source(src)
    if parquet:  # its field map names columns: checked before packing
        check_field_map(json.loads(field_map or "{}"), parquet_columns(src))
    report = pack(
        src,
        out,
        samples_per_shard=samples_per_shard,
        max_shard_bytes=max_shard_bytes,
        shuffle=shuffle,
        seed=seed,
        shard_prefix=shard_prefix,
        progress=progress,
        overwrite=force_overwrite,
        distributed=distributed,
    )
    if parquet and prepare_args is not None:  # the field map's columns as part names
        parts = part_field_map(json.loads(field_map or "{}"), report.part_names)
        yaml = _dataset_yaml(sample_type, json.dumps(parts))
        prepare_args = dataclasses.replace(prepare_args, dataset_yaml=yaml)
    prepared = None
    if prepare_args is not None:
        prepared = _run_prepare(out, prepare_args, shuffle, seed, progress, distributed)
    if distributed and not init_distributed().is_main:
        return  # rank 0 reports
    if as_json:
        data = dataclasses.asdict(report)
        data["prepare"] = dataclasses.asdict(prepared) if prepared is not None else None
        echo_json(data)
    else:
        _print_summary(report, prepared)
