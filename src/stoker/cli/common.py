"""Shared CLI plumbing: error reporting, JSON output and human-readable sizes."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

import click

from stoker.errors import MissingDependencyError, StokerError
from stoker.storage.options import env_debug, env_no_color

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

P = ParamSpec("P")
R = TypeVar("R")


def debug_enabled() -> bool:
    """True under ``stoker --debug`` (or ``STOKER_DEBUG=1``): errors show their traceback."""
    if env_debug():
        return True
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def style(text: str, **styles: Any) -> str:
    """``click.style`` unless ``NO_COLOR`` is set (https://no-color.org)."""
    return text if env_no_color() else click.style(text, **styles)


def user_error(error: BaseException) -> StokerError | None:
    """The error as the user should see it, or None if it is a bug (shown with its traceback).

    stoker's own errors, optional packages that are missing and files that do not exist or
    cannot be read are the user's to fix; anything else is stoker's.
    """
    if isinstance(error, StokerError):
        return error
    if isinstance(error, ImportError):
        ctx = click.get_current_context(silent=True)
        needed_for = ctx.command_path if ctx is not None else "this command"
        return MissingDependencyError.from_import_error(error, needed_for)
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError)):
        where = error.filename if isinstance(error.filename, str) else None
        return StokerError(error.strerror or str(error), path=where)
    return None


def report_error(error: StokerError) -> NoReturn:
    """Print ``error: ...`` as one paragraph on stderr and exit with status 2."""
    click.echo(style("error: ", fg="red", bold=True) + error.message, err=True)
    sys.exit(2)


def reports_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn user errors (:func:`user_error`) into a one-paragraph message and exit status 2.

    Under ``stoker --debug`` the traceback is shown instead.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            click.echo("\ninterrupted; nothing was changed.", err=True)
            sys.exit(130)
        except Exception as e:
            error = user_error(e)
            if error is None or debug_enabled():
                raise
            report_error(error)

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
