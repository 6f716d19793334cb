"""Loader states in files: find them, summarise them, re-cut them for another cluster size.

Inputs are files or folders of files (``*.pt``, ``*.pth``, ``*.json``), read in natural order
(``state_rank2.pt`` before ``state_rank10.pt``). ``redist`` writes Energon's layout by default:
one file per new rank in an output folder, named after the input files' numbering
(``OUT/state_rank{N}.pt``), each holding that rank's state for ``restore_state_rank()``; a
single input file holding every rank's state gives one file of the same name in the folder.
:func:`save_states` keeps the single-file form (a list for ``restore_state_global()``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, FormatError, StorageError, require
from stoker.runtime.state import check_state, merge, redistribute

_MAX_DEPTH = 4
STATE_SUFFIXES = (".pt", ".pth", ".json")
#: The key under which Megatron-LM's checkpoints nest the loader state.
MEGATRON_KEY = "dataloader_state_dict"
DEFAULT_RANK_FILE = "state_rank{rank}.pt"


def natural_key(name: str) -> list[int | str]:
    """Sort key comparing digit runs as numbers: ``rank2`` < ``rank10``.

    Example:
        >>> sorted(["r10.pt", "r2.pt"], key=natural_key)
        ['r2.pt', 'r10.pt']
    """
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def expand_paths(paths: list[str]) -> list[str]:
    """Files as given, and the state files of each folder, in natural order."""
    files: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            found = sorted(
                (c for c in p.iterdir() if c.is_file() and c.suffix in STATE_SUFFIXES),
                key=lambda c: natural_key(c.name),
            )
            if not found:
                raise StorageError(
                    f"the folder holds no state files ({', '.join(STATE_SUFFIXES)}).",
                    path=path,
                    hint="Pass the folder the loader states were saved in, or the files.",
                )
            files += [str(c) for c in found]
        else:
            files.append(path)
    return sorted(files, key=lambda f: natural_key(Path(f).name)) if len(paths) > 1 else files


@dataclass
class StateFiles:
    """The states found in a set of files, and how they were stored."""

    files: list[str]
    states: list[dict[str, Any]]
    #: True when each file held one rank's state (False: one file held them all).
    per_rank: bool
    #: True when the states were nested under Megatron-LM's ``dataloader_state_dict`` key.
    megatron_style: bool


def read_state_files(paths: list[str]) -> StateFiles:
    """Every loader state in the files or folders ``paths``."""
    files = expand_paths(paths)
    states: list[dict[str, Any]] = []
    per_file: list[int] = []
    megatron = False
    for path in files:
        value = _load(path)
        megatron = megatron or (isinstance(value, dict) and MEGATRON_KEY in value)
        found = _find_states(value, _MAX_DEPTH)
        if not found:
            raise FormatError(
                "no stoker loader state found in the file.",
                path=path,
                hint="Save states with save_state_rank() / save_state_global().",
            )
        states.extend(found)
        per_file.append(len(found))
    per_rank = len(files) > 1 or per_file == [1]
    return StateFiles(files, states, per_rank, megatron)


def load_states(paths: list[str]) -> list[dict[str, Any]]:
    """Every loader state in the files (JSON, or ``torch.save`` files, searched recursively)."""
    return read_state_files(paths).states


def _load(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise StorageError("file not found.", path=path, hint="Check the path.")
    head = file.read_bytes()[:1]
    if head in (b"{", b"["):
        return json.loads(file.read_text())
    torch = require("torch", "reading a .pt checkpoint")
    try:
        return torch.load(file, weights_only=True)
    except Exception as e:  # torch's message is pages long: `stoker --debug` shows it
        raise FormatError(
            "cannot read the checkpoint: it is neither JSON nor a file that "
            f"torch.load(weights_only=True) reads ({type(e).__name__}).",
            path=path,
            hint="Pass a JSON file or a file written by torch.save().",
        ) from e


def _find_states(value: Any, depth: int) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        if "stoker_state_version" in value:
            return [check_state(value)]
        items = list(value.values())
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return []
    if depth == 0:
        return []
    return [state for item in items for state in _find_states(item, depth - 1)]


@dataclass
class CheckpointReport:
    """A readable summary of the states of one save."""

    version: int
    ranks: int
    virtual_workers: int
    num_workers: int | None
    epoch: int
    consumed_micro_batches: int
    fingerprint: dict[str, Any]
    streams: dict[str, list[int]] = field(default_factory=dict)
    exhausted: list[int] = field(default_factory=list)


def describe(states: list[dict[str, Any]]) -> CheckpointReport:
    """Summarise the states of all ranks of one save."""
    merged = merge(states)
    return CheckpointReport(
        version=merged["stoker_state_version"],
        ranks=len(states),
        virtual_workers=merged["topology"]["virtual_workers"],
        num_workers=states[0]["topology"]["num_workers"],
        epoch=merged["epoch"],
        consumed_micro_batches=merged["consumed"],
        fingerprint=merged["fingerprint"],
        streams=merged["streams"],
        exhausted=merged["exhausted"],
    )


def save_states(states: Any, out: str) -> None:
    """Write states as JSON, or with ``torch.save`` when ``out`` ends in ``.pt``/``.pth``."""
    if out.endswith((".pt", ".pth")):
        import torch

        torch.save(states, out)
    else:
        Path(out).write_text(json.dumps(states, indent=1))


def default_num_workers(states: list[dict[str, Any]], world_size: int) -> int:
    """Workers per new rank: the same total as saved (Energon's rule) where the streams allow.

    Example: 2 ranks x 2 workers re-cut for 4 ranks gives 1 worker each, for 1 rank 4.
    """
    topology = states[0]["topology"]
    v, saved = int(topology["virtual_workers"]), int(topology["num_workers"])
    if saved == 0:
        return 0
    total = len(states) * saved
    workers = total // world_size if total % world_size == 0 else saved
    while workers > 1 and v % (world_size * workers):
        workers -= 1
    return max(workers, 1)


def rank_file_namer(files: list[str]) -> Callable[[int], str]:
    """New rank -> file name, following the one number that counts the input files.

    ``state_rank0.pt, state_rank1.pt`` gives ``state_rank{N}.pt``; names without such a
    number give :data:`DEFAULT_RANK_FILE`.
    """
    names = [Path(f).name for f in files]
    tokens = [re.split(r"(\d+)", n) for n in names]
    if len(names) > 1 and len({len(t) for t in tokens}) == 1:
        varying = [i for i in range(len(tokens[0])) if len({t[i] for t in tokens}) > 1]
        if len(varying) == 1 and all(t[varying[0]].isdigit() for t in tokens):
            pos, first = varying[0], tokens[0]
            width, base = len(first[pos]), min(int(t[pos]) for t in tokens)
            return lambda r: "".join(
                str(base + r).zfill(width) if i == pos else s for i, s in enumerate(first)
            )
    return lambda r: DEFAULT_RANK_FILE.format(rank=r)


def redistribute_files(
    paths: list[str],
    out: str,
    world_size: int,
    num_workers: int | None = None,
    *,
    single_file: bool = False,
) -> list[str]:
    """Re-cut the states in ``paths`` for ``world_size`` ranks; returns the files written.

    Writes a folder ``out`` in Energon's layout (see the module doc), or with ``single_file``
    one file ``out`` holding the list of the new ranks' states.
    """
    found = read_state_files(paths)
    workers = default_num_workers(found.states, world_size) if num_workers is None else num_workers
    states = redistribute(found.states, world_size, workers)
    if single_file:
        save_states(states, out)
        return [out]
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            "the output path is a file, not a folder.",
            path=out,
            hint="Pass a folder for one file per rank, or --single-file to write one file.",
        )
    folder.mkdir(parents=True, exist_ok=True)
    if not found.per_rank:
        target = str(folder / Path(found.files[0]).name)
        save_states(states, target)
        return [target]
    name = rank_file_namer(found.files)
    written = []
    for rank, state in enumerate(states):
        target = str(folder / name(rank))
        save_states({MEGATRON_KEY: state} if found.megatron_style else state, target)
        written.append(target)
    return written
