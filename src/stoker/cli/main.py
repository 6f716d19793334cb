"""Entry point of the ``stoker`` command.

Subcommands are imported only when they run, so ``stoker --help`` starts in milliseconds and
never imports torch.
"""

from __future__ import annotations

import difflib
import importlib
import sys

import click

from stoker.cli.common import CONTEXT_SETTINGS, debug_enabled, report_error, user_error

#: Subcommand name -> (module, attribute, one-line help shown by ``stoker --help``).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "prepare": ("stoker.cli.prepare", "command", "Index a dataset's shards and write .nv-meta."),
    "prepare-media": ("stoker.cli.prepare_media", "command", "Probe media; store its metadata."),
    "pack": ("stoker.cli.pack", "command", "Turn a folder of files or a JSONL file into shards."),
    "info": ("stoker.cli.info", "command", "Summarise a prepared dataset."),
    "lint": ("stoker.cli.lint", "command", "Check a prepared dataset for problems."),
    "checkpoint": ("stoker.cli.checkpoint", "command", "Inspect and re-cut saved loader states."),
    "mix": ("stoker.cli.mix", "command", "Show a metadataset's planned mix over the steps."),
    "preview": ("stoker.cli.preview", "command", "Show samples of a split, decoded."),
    "bench": ("stoker.cli.bench", "command", "Measure loading speed; recommend num_workers."),
    "mount": ("stoker.cli.mount", "command", "Browse a dataset's samples as read-only files."),
    "analyze-debug": (
        "stoker.cli.analyze_debug",
        "command",
        "Summarise worker_debug_path logs: what each worker loaded, when.",
    ),
    "doctor": ("stoker.cli.doctor", "command", "List the optional backends installed here."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        try:
            command = getattr(importlib.import_module(module), attr)
        except ImportError as e:
            error = user_error(e)
            if error is None or debug_enabled():
                raise
            report_error(error)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}.{attr} is not a click command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0])
        if name not in COMMANDS and not name.startswith("-"):
            close = difflib.get_close_matches(name, list(COMMANDS), n=1)
            suggestion = f" Did you mean {close[0]!r}?" if close else ""
            ctx.fail(f"No such command {name!r}.{suggestion} Run 'stoker --help' for the list.")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, short) for name, (_, _, short) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="stoker", prog_name="stoker")
@click.option(
    "--debug",
    is_flag=True,
    help="Show the full traceback of an error (also STOKER_DEBUG=1).",
)
def cli(debug: bool) -> None:
    """stoker: prepare, inspect and load multimodal training data (Energon-compatible).

    \b
    Typical workflow:
      stoker pack ./images ./shards --samples-per-shard 1000   # files -> tar shards
      stoker prepare ./shards --non-interactive --split-ratio 8,1,1 \\
          --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
      stoker info ./shards
      stoker lint ./shards

    Errors are one line with what to do; `stoker --debug COMMAND ...` shows the traceback.
    `stoker doctor` lists the optional backends (torch, Pillow, PyAV, ...) installed here.
    Run `stoker COMMAND --help` for the options of each command.
    """


def main() -> None:
    """Console-script entry point: user errors end in one line and exit status 2."""
    try:
        cli(prog_name="stoker")
    except Exception as e:  # raised outside a command (an import, a callback)
        error = user_error(e)
        if error is None or "--debug" in sys.argv[1:2] or debug_enabled():
            raise
        report_error(error)


if __name__ == "__main__":
    main()
