"""Energon's CLI command objects, for code that imports them by Energon's module paths.

Tests and scripts written for Energon call its click commands directly (``CliRunner().invoke(
megatron.energon.tools.prepare.command, [...])``). ``stoker.energon_alias`` serves these objects
at those paths. They are stoker's commands (same arguments and flags as Energon's), except that a
failure exits with status 1, as Energon's ``ClickException`` does (stoker's own CLI uses 2 for
"the input is wrong"), and ``preview`` shows samples one at a time as Energon's does
(:mod:`stoker.cli.energon_preview`). Usage errors (unknown flags) exit with 2 in both.

=================================================  =====================================
Energon module path                                object here
=================================================  =====================================
``megatron.energon.tools.prepare.command``         :data:`prepare_command`
``megatron.energon.tools.prepare_media.command``   :data:`prepare_media_command`
``megatron.energon.tools.lint.command``            :data:`lint_command`
``megatron.energon.tools.info.command``            :data:`info_command`
``megatron.energon.tools.preview.command``         :data:`preview_command`
``megatron.energon.tools.checkpoint.command``      :data:`checkpoint_command`
``megatron.energon.tools.checkpoint.command_redist``  :data:`command_redist`
``megatron.energon.tools.checkpoint.command_info``    :data:`command_info`
``megatron.energon.tools.analyze_debug.command``   :data:`analyze_debug_command`
``megatron.energon.cli.main.main``                 :data:`main`
``megatron.energon.cli.main.<name>_command``       the objects above, by the same names
=================================================  =====================================

Example:
    >>> from click.testing import CliRunner
    >>> args = ["coco-wds", "--split-parts=train"]
    >>> CliRunner().invoke(lint_command, args).exit_code
    0
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from stoker.cli import checkpoint, energon_preview, info, lint, mount, prepare, prepare_media
from stoker.cli.analyze_debug import command as analyze_debug_command
from stoker.cli.common import CONTEXT_SETTINGS

#: stoker's exit status for bad input, and Energon's for any failure.
_STOKER_ERROR, _ENERGON_ERROR = 2, 1


def _exit_like_energon(callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except SystemExit as e:
            if e.code == _STOKER_ERROR:
                raise SystemExit(_ENERGON_ERROR) from None
            raise

    return run


def energon_command(command: click.Command, name: str | None = None) -> click.Command:
    """``command`` with Energon's exit status for failures (groups: every subcommand)."""
    if isinstance(command, click.Group):
        group = click.Group(
            name=name or command.name,
            help=command.help,
            context_settings=command.context_settings,
        )
        for sub_name, sub in command.commands.items():
            group.add_command(energon_command(sub), sub_name)
        return group
    if command.callback is None:
        raise TypeError(f"{command.name} has no callback")
    return click.Command(
        name=name or command.name,
        params=command.params,
        callback=_exit_like_energon(command.callback),
        help=command.help,
        short_help=command.short_help,
        context_settings=command.context_settings,
    )


prepare_command = energon_command(prepare.command)
prepare_media_command = energon_command(prepare_media.command)
lint_command = energon_command(lint.command)
info_command = energon_command(info.command)
preview_command = energon_command(energon_preview.command)
mount_command = energon_command(mount.command)
checkpoint_command = energon_command(checkpoint.command)
command_redist = checkpoint_command.commands["redist"]  # type: ignore[attr-defined]
command_info = checkpoint_command.commands["info"]  # type: ignore[attr-defined]


@click.group(name="energon", context_settings=CONTEXT_SETTINGS)
def main() -> None:
    """Energon's `energon` command, served by stoker (see `stoker --help` for stoker's own)."""


for _command in (
    analyze_debug_command,
    checkpoint_command,
    info_command,
    lint_command,
    mount_command,
    prepare_command,
    prepare_media_command,
    preview_command,
):
    main.add_command(_command)
