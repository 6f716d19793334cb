"""``stoker prepare`` of what is not a folder of tar shards: a metadataset YAML (its join
indexes), a ``.jsonl`` file (its line index), a folder of Parquet files (checked, with a
dataset.yaml written if asked)."""

from __future__ import annotations

import dataclasses

import click

from stoker.cli.common import echo_json, human_bytes
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.parquet import is_parquet_dataset, prepare_parquet
from stoker.metadataset import is_metadataset
from stoker.sources.joins import JoinReport, prepare_joins
from stoker.storage import open_store


def prepare_other_kind(
    path: str,
    progress: bool,
    as_json: bool,
    allowed_modules: tuple[str, ...],
    sample_type: str | None,
    field_map: str | None,
    dataset_yaml_name: str,
) -> bool:
    """Prepare ``path`` if it is a metadataset, a JSONL file or a Parquet folder, and print
    what was done; False if it is none of these (a folder of tar shards)."""
    if is_metadataset(path):
        reports = prepare_joins(path, progress=progress, allowed_modules=allowed_modules)
        _print_joins(path, reports, as_json)
    elif path.endswith(".jsonl"):
        samples, size = prepare_jsonl(path, progress=progress)
        if as_json:
            echo_json({"path": path, "samples": samples, "bytes": size})
        else:
            click.echo(f"Done. Found {samples} samples ({human_bytes(size)}) in {path}.")
    elif is_parquet_dataset(open_store(path)):
        _prepare_parquet(path, sample_type, field_map, dataset_yaml_name, as_json)
    else:
        return False
    return True


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
