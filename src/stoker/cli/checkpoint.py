"""``stoker checkpoint``: inspect saved loader states and re-cut them for another cluster size."""

from __future__ import annotations

import os

import click

from stoker.cli.common import CONTEXT_SETTINGS, echo_json, reports_errors


@click.group(name="checkpoint", context_settings=CONTEXT_SETTINGS)
def command() -> None:
    """Inspect and convert saved loader states.

    States come from save_state_rank() / save_state_global(), stored with torch.save or as JSON
    (also when nested inside a training checkpoint dict).
    """


@command.command(name="info", context_settings=CONTEXT_SETTINGS)
@click.argument("files", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@reports_errors
def info(files: tuple[str, ...], as_json: bool) -> None:
    """Summarise the loader states in FILES (all ranks of one save; files or folders).

    \b
    Examples:
      stoker checkpoint info ckpt/loader_states.pt
      stoker checkpoint info ckpt/                  # every state file in the folder
    """
    from stoker.runtime.checkpoint import describe, load_states

    report = describe(load_states(list(files)))
    if as_json:
        echo_json(report)
        return
    fp = report.fingerprint
    click.echo(f"state version     {report.version}")
    click.echo(
        f"topology          {report.ranks} rank(s) x {report.num_workers} worker(s), "
        f"{report.virtual_workers} virtual workers"
    )
    click.echo(
        f"dataset           {fp.get('dataset')} (split {fp.get('split_part')}, "
        f"{fp.get('samples')} samples)"
    )
    click.echo(f"batch size        {fp.get('batch_size')}, seed offset {fp.get('seed_offset')}")
    click.echo(
        f"position          epoch {report.epoch}, "
        f"{report.consumed_micro_batches} micro-batches consumed"
    )
    click.echo(f"streams saved     {len(report.streams)}, exhausted {len(report.exhausted)}")
    for stream, (*counts, skip) in list(report.streams.items())[:8]:
        taken = ", ".join(map(str, counts))
        click.echo(f"  stream {stream:>4}: samples taken per dataset [{taken}], skip {skip}")
    if len(report.streams) > 8:
        click.echo(f"  ... and {len(report.streams) - 8} more")


@command.command(name="redist", context_settings=CONTEXT_SETTINGS)
@click.argument("files", nargs=-1, required=True)
@click.argument("out", nargs=1)
@click.option(
    "--new-world-size",
    type=click.IntRange(1),
    help="Ranks to resume on (asked for when not given).",
)
@click.option(
    "--num-workers",
    type=click.IntRange(0),
    default=None,
    help="Dataloader workers per rank on resume (default: the saved total spread over the new "
    "ranks, as Energon does).",
)
@click.option(
    "--single-file",
    is_flag=True,
    help="Write one file OUT holding the list of all new ranks' states (for "
    "restore_state_global) instead of a folder with one file per rank. Implied when OUT ends "
    "in .pt, .pth or .json and is not a folder.",
)
@reports_errors
def redist(
    files: tuple[str, ...],
    out: str,
    new_world_size: int | None,
    num_workers: int | None,
    single_file: bool,
) -> None:
    """Re-cut the states in FILES for --new-world-size ranks and write them to OUT.

    FILES are state files or folders of them (all ranks of one save). OUT is a folder that
    gets one file per new rank, named as the input files are numbered (Energon's layout, e.g.
    OUT/state_rank0.pt ... state_rank3.pt); each rank passes its file's content to
    restore_state_rank(). The virtual workers must divide evenly over the new ranks and workers.

    \b
    Examples:
      stoker checkpoint redist ckpt/state_rank*.pt resumed/ --new-world-size 4
      stoker checkpoint redist ckpt/ resumed.pt --new-world-size 4 --single-file
    """
    from stoker.runtime.checkpoint import load_states, redistribute_files

    if new_world_size is None:
        states = load_states(list(files))
        click.echo(f"Current DP world size: {len(states)}")
        click.echo(f"Current number of workers per DP rank: {states[0]['topology']['num_workers']}")
        new_world_size = click.prompt("Please enter the new DP world size", type=click.IntRange(1))
    single = single_file or (out.endswith((".pt", ".pth", ".json")) and not os.path.isdir(out))
    written = redistribute_files(list(files), out, new_world_size, num_workers, single_file=single)
    where = out if single or len(written) == 1 else f"{out} ({os.path.basename(written[0])} ...)"
    click.echo(f"Wrote {new_world_size} rank states to {where}.")
