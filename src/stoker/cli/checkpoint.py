"""``stoker checkpoint``: inspect saved loader states and re-cut them for another cluster size."""

from __future__ import annotations

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
    """Summarise the loader states in FILES (all ranks of one save).

    \b
    Example:
      stoker checkpoint info ckpt/loader_states.pt
    """
    from stoker.checkpoint import describe, load_states

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
@click.option("--new-world-size", type=click.IntRange(1), required=True, help="Ranks to resume on.")
@click.option(
    "--num-workers",
    type=click.IntRange(0),
    default=None,
    help="Dataloader workers per rank on resume (default: as saved).",
)
@reports_errors
def redist(files: tuple[str, ...], out: str, new_world_size: int, num_workers: int | None) -> None:
    """Re-cut the states in FILES for --new-world-size ranks and write them to OUT.

    OUT holds one state per new rank (JSON, or torch.save for .pt/.pth); each rank passes the
    list to restore_state_global(). The virtual workers must divide evenly over the new ranks
    and workers.

    \b
    Example:
      stoker checkpoint redist ckpt/loader_states.pt resumed.pt --new-world-size 4
    """
    from stoker.checkpoint import load_states, redistribute_files

    workers = num_workers
    if workers is None:  # as saved, or fewer if the virtual workers do not divide otherwise
        topology = load_states(list(files))[0]["topology"]
        v, workers = topology["virtual_workers"], topology["num_workers"]
        while workers > 1 and v % (new_world_size * workers):
            workers -= 1
    written = redistribute_files(list(files), out, new_world_size, workers)
    click.echo(f"Wrote {written} rank states to {out}.")
