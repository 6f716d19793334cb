"""Shared CLI plumbing: error reporting, JSON output and human-readable sizes."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import click

from stoker.errors import StokerError

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

P = ParamSpec("P")
R = TypeVar("R")


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn :class:`StokerError` into a one-paragraph message and exit status 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except StokerError as e:
            click.echo(click.style("error: ", fg="red", bold=True) + e.message, err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("\ninterrupted; nothing was changed.", err=True)
            sys.exit(130)

    return wrapper


def echo_json(report: Any) -> None:
    """Print a report (dataclass or plain data) as indented JSON."""
    is_instance = dataclasses.is_dataclass(report) and not isinstance(report, type)
    data = dataclasses.asdict(report) if is_instance else report
    click.echo(json.dumps(data, indent=2, default=str))


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
