"""Entry point of the ``stoker`` command.

Subcommands are imported only when they run, so ``stoker --help`` starts in milliseconds and
never imports torch.
"""

from __future__ import annotations

import importlib

import click

from stoker.cli.common import CONTEXT_SETTINGS

#: Subcommand name -> (module, attribute, one-line help shown by ``stoker --help``).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "prepare": ("stoker.cli.prepare", "command", "Index a dataset's shards and write .nv-meta."),
    "prepare-media": ("stoker.cli.prepare_media", "command", "Probe media; store its metadata."),
    "pack": ("stoker.cli.pack", "command", "Turn a folder of files or a JSONL file into shards."),
    "info": ("stoker.cli.info", "command", "Summarise a prepared dataset."),
    "lint": ("stoker.cli.lint", "command", "Check a prepared dataset for problems."),
    "checkpoint": ("stoker.cli.checkpoint", "command", "Inspect and re-cut saved loader states."),
    "preview": ("stoker.cli.preview", "command", "Show samples of a split, decoded."),
    "bench": ("stoker.cli.bench", "command", "Measure loading speed; recommend num_workers."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}.{attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, short) for name, (_, _, short) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="stoker", prog_name="stoker")
def cli() -> None:
    """stoker: prepare, inspect and load multimodal training data (Energon-compatible).

    \b
    Typical workflow:
      stoker pack ./images ./shards --samples-per-shard 1000   # files -> tar shards
      stoker prepare ./shards --non-interactive --split-ratio 8,1,1 \\
          --sample-type CaptioningSample --field-map '{"image": "jpg", "caption": "txt"}'
      stoker info ./shards
      stoker lint ./shards

    Run `stoker COMMAND --help` for the options of each command.
    """


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="stoker")


if __name__ == "__main__":
    main()
