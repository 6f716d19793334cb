"""The questions ``stoker prepare`` asks when it runs interactively (as Energon's does).

The questions that need no data (overwrite? split ratio? sample type?) come before any work;
the field map, which names the parts found, after indexing; media probing after the last
answer. Time spent answering is not counted in the reported time.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import click

from stoker.errors import ConfigError
from stoker.format.dataset_config import parse_field_spec
from stoker.format.pending import PendingPrepare
from stoker.format.sample_types import BUILTIN_MODULES, CRUDE_CLASS, SAMPLE_TYPES, FieldSpec
from stoker.format.splits import parse_split_ratio
from stoker.storage import open_store

MODULE = BUILTIN_MODULES[1]  # Energon's name, so that Energon reads the file too
MAX_PARTS_FOR_FIELD_MAP = 10
BASE_SAMPLE = "Sample"

#: The sample-type menu as Energon's ``prepare`` numbers it (its public ``Sample`` subclasses by
#: name, then crude), so that instructions such as "type 9 (VQASample)" work here too.
#: (label shown, class written to dataset.yaml)
SAMPLE_TYPE_MENU: tuple[tuple[str, str], ...] = (
    *(
        (name, name)
        for name in (
            "CaptioningSample",
            "ImageClassificationSample",
            "ImageSample",
            "InterleavedSample",
            "MultiChoiceVQASample",
            "OCRSample",
            BASE_SAMPLE,
            "SimilarityInterleavedSample",
            "TextSample",
            "VQASample",
            "VidQASample",
        )
    ),
    ("Crude sample (plain dict for cooking)", CRUDE_CLASS),
)

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


NO_TERMINAL_HINT = (
    "Use `--non-interactive` with --split-ratio (e.g. 8,1,1) and --sample-type/--field-map "
    "(or --skip-dataset-yaml), or run it in a terminal."
)


@contextlib.contextmanager
def asking(pending: PendingPrepare | None = None) -> Iterator[None]:
    """Around questions: their time is taken out of ``pending``'s, and an ended input is a
    clean error (no terminal) or an interruption (Ctrl-C, Ctrl-D), never a bare "Aborted!".

    A user who gives up at a question abandons the run: its shard results are not kept for
    resuming (they are kept when a run fails or is killed while working)."""
    start = time.perf_counter()
    try:
        yield
    except click.Abort:
        if pending is not None:
            pending.abandoned = True
        if not sys.stdin.isatty():
            raise ConfigError(
                "stoker prepare needs answers, but its input is not a terminal and ended.",
                hint=NO_TERMINAL_HINT,
            ) from None
        raise KeyboardInterrupt from None
    except KeyboardInterrupt:
        if pending is not None:
            pending.abandoned = True
        raise
    finally:
        if pending is not None:
            pending.user_seconds += time.perf_counter() - start


def check_folder(path: str) -> None:
    """Fail unless ``path`` is a folder (before any question is asked)."""
    if not open_store(path).is_dir(""):
        raise ConfigError(
            "not a folder.", path=path, hint="Pass the folder that holds the dataset's shards."
        )


def ask_split_ratio() -> str:
    """Ask for the train/val/test ratio until it parses."""
    while True:
        text: str = click.prompt(
            'Please enter a desired train/val/test split like "0.5, 0.2, 0.3" or "8,1,1"'
        )
        try:
            parse_split_ratio(text)
        except ConfigError as e:
            click.echo(e.message)
            continue
        return text


def ask_sample_type() -> str | None:
    """Ask whether to write a dataset.yaml and for which sample type (None: no dataset.yaml)."""
    if not click.confirm("Do you want to create a dataset.yaml interactively?", default=True):
        click.echo("No dataset.yaml written; you will need to add one before loading.")
        return None
    return _ask_sample_type()


def ask_dataset_yaml(
    pending: PendingPrepare, sample_type: str
) -> tuple[dict[str, Any] | None, dict[str, bytes]]:
    """Ask for the field map of ``sample_type``; returns (dataset.yaml content, extra files)."""
    if sample_type == CRUDE_CLASS:
        click.echo(
            "CrudeWebdataset needs no field map: crude samples are plain dicts, cooked by a "
            "Cooker of your TaskEncoder (you may add subflavors in the metadataset)."
        )
        return {"__module__": MODULE, "__class__": CRUDE_CLASS}, {}
    spec = {"__module__": MODULE, "__class__": sample_type}
    parts = sorted(pending.part_names)
    use_map = len(parts) <= MAX_PARTS_FOR_FIELD_MAP and click.confirm(
        "Do you want to set a simple field_map[Y] (or write your own sample_loader [n])?",
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
    """The class picked from :data:`SAMPLE_TYPE_MENU`, by its number."""
    click.echo("The following sample types are available:")
    for i, (label, _) in enumerate(SAMPLE_TYPE_MENU):
        click.echo(f"{i}. {label}")
    while True:
        choice: int = click.prompt("Please enter a number to choose a class", type=int)
        if not 0 <= choice < len(SAMPLE_TYPE_MENU):
            click.echo(
                f"Invalid choice. Please enter a number from 0 to {len(SAMPLE_TYPE_MENU) - 1}."
            )
            continue
        name = SAMPLE_TYPE_MENU[choice][1]
        if name == BASE_SAMPLE:
            click.echo("Sample is the base class and has no data fields; choose a concrete type.")
            continue
        return name


def _ask_field_map(fields: tuple[FieldSpec, ...], pending: PendingPrepare) -> dict[str, str]:
    click.echo(f"Parts in the samples: {', '.join(sorted(pending.part_names))}.")
    click.echo("Give a part per field; 'jpg,png' means either, 'json[caption]' an item.")
    field_map: dict[str, str] = {}
    for field in fields:
        suffix = "" if field.required else ", optional: leave empty to skip"
        while True:
            value: str = click.prompt(
                f"Please enter a webdataset field name for {field.name!r} ({field.type}{suffix})",
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
