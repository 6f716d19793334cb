"""The questions ``stoker prepare`` asks when it runs interactively (as Energon's does)."""

from __future__ import annotations

from typing import Any

import click

from stoker.errors import ConfigError
from stoker.format.dataset_config import parse_field_spec
from stoker.format.prepare import PendingPrepare
from stoker.format.sample_types import BUILTIN_MODULES, CRUDE_CLASS, SAMPLE_TYPES, FieldSpec
from stoker.format.splits import parse_split_ratio

MODULE = BUILTIN_MODULES[1]  # Energon's name, so that Energon reads the file too
MAX_PARTS_FOR_FIELD_MAP = 10

SAMPLE_LOADER_TEMPLATE = '''\
"""Turns the raw parts of one sample into the fields of {sample_type}.

This file runs only when the loader is told to trust it (see stoker's docs on sample loaders).
"""

from typing import Any


def sample_loader(raw: dict[str, Any]) -> dict[str, Any]:
    # raw maps part names ({parts}) to decoded values, plus "__key__".
    return dict(
{fields}
    )


def part_filter(part: str) -> bool:
    # Return True for the parts that sample_loader reads; others are not even decoded.
    return part in ({part_tuple})
'''


def ask_split_ratio() -> str:
    """Ask for the train/val/test ratio until it parses."""
    while True:
        text: str = click.prompt('Split ratio for train,val,test (e.g. "8,1,1" or "0.8,0.1,0.1")')
        try:
            parse_split_ratio(text)
        except ConfigError as e:
            click.echo(e.message)
            continue
        return text


def ask_dataset_yaml(pending: PendingPrepare) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
    """Ask for the sample type and field map; returns (dataset.yaml content, extra files)."""
    if not click.confirm("Create a dataset.yaml now?", default=True):
        click.echo("No dataset.yaml written; you will need to add one before loading.")
        return None, {}
    sample_type = _ask_sample_type()
    if sample_type == CRUDE_CLASS:
        click.echo("Crude samples are plain dicts; cook them with the task encoder's cookers.")
        return {"__module__": MODULE, "__class__": CRUDE_CLASS}, {}
    spec = {"__module__": MODULE, "__class__": sample_type}
    parts = sorted(pending.part_names)
    use_map = len(parts) <= MAX_PARTS_FOR_FIELD_MAP and click.confirm(
        "Map parts to fields with a field_map [Y], or write your own sample_loader.py [n]?",
        default=True,
    )
    if use_map:
        field_map = _ask_field_map(SAMPLE_TYPES[sample_type], pending)
        return {"sample_type": spec, "field_map": field_map}, {}
    template = _sample_loader_template(sample_type, parts)
    click.echo("Wrote a sample_loader.py template into .nv-meta; edit it to fill the fields.")
    yaml = {
        "sample_type": spec,
        "sample_loader": "sample_loader.py:sample_loader",
        "part_filter": "sample_loader.py:part_filter",
    }
    return yaml, {"sample_loader.py": template.encode()}


def _ask_sample_type() -> str:
    choices = [*SAMPLE_TYPES, CRUDE_CLASS]
    click.echo("Sample types:")
    for i, name in enumerate(choices):
        label = "crude: plain dicts, cooked by the task encoder" if name == CRUDE_CLASS else ""
        click.echo(f"  {i:>2}. {name} {label}".rstrip())
    while True:
        choice: int = click.prompt("Number of the sample type", type=int)
        if 0 <= choice < len(choices):
            return choices[choice]
        click.echo(f"Please enter a number from 0 to {len(choices) - 1}.")


def _ask_field_map(fields: tuple[FieldSpec, ...], pending: PendingPrepare) -> dict[str, str]:
    click.echo(f"Parts in the samples: {', '.join(sorted(pending.part_names))}.")
    click.echo("Give a part per field; 'jpg,png' means either, 'json[caption]' an item.")
    field_map: dict[str, str] = {}
    for field in fields:
        suffix = "" if field.required else ", optional: leave empty to skip"
        while True:
            value: str = click.prompt(
                f"Part for {field.name!r} ({field.type}{suffix})",
                default="" if not field.required else None,
                show_default=False,
            )
            if not value.strip() and not field.required:
                break
            try:
                pending.check_parts([access.part for access in parse_field_spec(value)])
            except ConfigError as e:
                click.echo(e.problem + " " + (e.hint or ""))
                continue
            field_map[field.name] = value.strip()
            break
    return field_map


def _sample_loader_template(sample_type: str, parts: list[str]) -> str:
    lines = [
        f'        {f.name}=raw["{parts[0] if parts else "TODO"}"],  # TODO'
        for f in SAMPLE_TYPES[sample_type]
    ]
    return SAMPLE_LOADER_TEMPLATE.format(
        sample_type=sample_type,
        parts=", ".join(parts),
        fields="\n".join(lines),
        part_tuple=", ".join(repr(p) for p in parts) + ("," if len(parts) == 1 else ""),
    )
