"""Energon's ``preview`` command: samples one at a time, as Energon prints them.

Served at ``megatron.energon.tools.preview.command`` (see :mod:`stoker.cli.energon_tools`).
Each sample is printed as ``Sample N`` and one `` - field (type): value`` line per field; after
each, "Continue?" is asked, and answering no moves on to the next split part. stoker's own
``stoker preview`` shows a summary per field instead (shapes, ranges, thumbnails).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from stoker.cli.common import CONTEXT_SETTINGS
from stoker.errors import StokerError
from stoker.format.meta import DEFAULT_DATASET_YAML

_HIDDEN = ("__restore_key__", "__subflavors__", "__sources__")
_MAX_ITEMS = 128


def field_lines(sample: Any) -> list[str]:
    """`` - name (type): value`` for each field of a sample (dataclass or dict)."""
    if dataclasses.is_dataclass(sample) and not isinstance(sample, type):
        fields = [
            (f.name, _resolve(type(sample), f.name, f.type)) for f in dataclasses.fields(sample)
        ]
        values = {name: getattr(sample, name) for name, _ in fields}
    else:
        values = dict(sample)
        fields = [(name, type(value)) for name, value in values.items()]
    return [
        f" - {name} ({kind}): {value_text(values[name])}"
        for name, kind in fields
        if name not in _HIDDEN
    ]


def value_text(value: Any) -> str:
    """A short text for a field value: repr for scalars, shape and dtype for tensors."""
    if isinstance(value, str | int | float | bool | type(None)):
        return repr(value)
    if isinstance(value, bytes):
        return f"bytes(length={len(value)}, value={value[:_MAX_ITEMS]!r})"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"Tensor(shape={tuple(shape)}, dtype={dtype})"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_text(v) for v in value[:_MAX_ITEMS]) + "]"
    return repr(value)


def _resolve(cls: type, name: str, annotation: Any) -> Any:
    """The field's type as a class where it resolves (shown as ``<class 'str'>``, as Energon)."""
    if not isinstance(annotation, str):
        return annotation
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            module = sys.modules.get(klass.__module__)
            scope = {"torch": sys.modules.get("torch"), **vars(module)} if module else {}
            try:
                return eval(annotation, scope)  # as typing.get_type_hints does
            except Exception:  # a name only imported for type checking: show it as written
                return annotation
    return annotation


@click.command(name="preview", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.option(
    "--split-parts", default="train,val,test", show_default=True, help="The splits to preview."
)
@click.option(
    "--dataset-config",
    default=DEFAULT_DATASET_YAML,
    show_default=True,
    help="Dataset config file name.",
)
def command(path: str, split_parts: str, dataset_config: str) -> None:
    """Preview samples of a dataset on the console, one at a time (Energon's preview)."""
    from stoker.preview.verify import Problem, iter_built
    from stoker.sources.source import EmptyDatasetError

    for part in split_parts.split(","):
        try:
            samples = iter_built(path, split_part=part, dataset_config=dataset_config)
            shown = 0
            for shown, (raw, sample) in enumerate(samples, start=1):
                click.echo(f"Sample {shown - 1}")
                if isinstance(sample, Problem):
                    click.echo(f" - __key__: {raw.key!r}\n - error: {sample}")
                else:
                    click.echo("\n".join(field_lines(sample)))
                click.confirm("Continue?", abort=True)
            if shown == 0:
                click.echo(f"Dataset {part} is empty. Skipping.")
        except click.Abort:
            click.echo("Exiting Preview")
        except EmptyDatasetError:
            click.echo(f"Dataset {part} is empty. Skipping.")
        except StokerError as e:
            raise click.ClickException(e.message) from None
