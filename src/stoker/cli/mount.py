"""``stoker mount``: a prepared dataset's samples as read-only files (Energon's ``mount``)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import click

from stoker.cli.common import CONTEXT_SETTINGS, human_bytes, reports_errors
from stoker.errors import StokerError


@click.command(name="mount", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=str)
@click.argument("mountpoint", type=click.Path(file_okay=False))
@click.option(
    "--detach", "-d", is_flag=True, help="Run in the background (return once it is mounted)."
)
@click.option(
    "--sample-folders",
    "-s",
    is_flag=True,
    help="A folder per sample holding its parts by name (KEY/jpg). Default: one folder with "
    "every part as KEY.PART.",
)
@reports_errors
def command(path: str, mountpoint: str, detach: bool, sample_folders: bool) -> None:
    """Mount the prepared dataset at PATH read-only at MOUNTPOINT, its sample parts as files.

    Files are read from the shards when opened (local or remote PATH). Needs FUSE: the mfusepy
    package (pip install 'stoker[mount]'), libfuse and a usable /dev/fuse. Unmount with
    `fusermount -u MOUNTPOINT` (or Ctrl-C when not detached).

    \b
    Examples:
      stoker mount ./shards /mnt/ds          # /mnt/ds/000001.jpg, /mnt/ds/000001.txt, ...
      stoker mount ./shards /mnt/ds -s -d    # /mnt/ds/000001/jpg, ...; in the background
    """
    from stoker.format.mount import DatasetTree, MountOperations

    fuse = _load_fuse()
    tree = DatasetTree(path, sample_folders=sample_folders)
    os.makedirs(mountpoint, exist_ok=True)
    click.echo(
        f"Mounting {path} at {mountpoint}: {tree.files} files, {human_bytes(tree.bytes)}. "
        f"Unmount with `fusermount -u {mountpoint}`."
    )
    operations = type("StokerFS", (MountOperations, fuse.Operations), {})(tree)
    try:
        fuse.FUSE(operations, mountpoint, foreground=not detach, nothreads=True, ro=True)
    except RuntimeError as e:
        raise StokerError(
            f"FUSE could not mount {mountpoint} ({e}).",
            hint="Check that /dev/fuse is usable by you and fusermount is installed, and that "
            "MOUNTPOINT is an empty folder that is not mounted already.",
        ) from None


def _load_fuse() -> ModuleType:
    try:
        return importlib.import_module("mfusepy")
    except ImportError:
        raise StokerError(
            "stoker mount needs the mfusepy package.", hint="pip install 'stoker[mount]'"
        ) from None
    except OSError as e:  # mfusepy loads libfuse when imported
        raise StokerError(
            f"stoker mount needs libfuse, which was not found ({e}).",
            hint="Install it with your system's packages, e.g. `apt-get install fuse3`.",
        ) from None
