"""Loader states in files: find them, summarise them, re-cut them for another cluster size."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stoker.errors import FormatError, StorageError
from stoker.state import check_state, merge, redistribute

_MAX_DEPTH = 4


def load_states(paths: list[str]) -> list[dict[str, Any]]:
    """Every loader state in the files (JSON, or ``torch.save`` files, searched recursively)."""
    states: list[dict[str, Any]] = []
    for path in paths:
        found = _find_states(_load(path), _MAX_DEPTH)
        if not found:
            raise FormatError(
                "no stoker loader state found in the file.",
                path=path,
                hint="Save states with save_state_rank() / save_state_global().",
            )
        states.extend(found)
    return states


def _load(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise StorageError("file not found.", path=path, hint="Check the path.")
    head = file.read_bytes()[:1]
    if head in (b"{", b"["):
        return json.loads(file.read_text())
    import torch

    try:
        return torch.load(file, weights_only=True)
    except Exception as e:
        raise FormatError(
            f"cannot read the checkpoint ({e}).",
            path=path,
            hint="Pass a JSON file or a file written by torch.save().",
        ) from None


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


def save_states(states: list[dict[str, Any]], out: str) -> None:
    """Write states as JSON, or with ``torch.save`` when ``out`` ends in ``.pt``/``.pth``."""
    if out.endswith((".pt", ".pth")):
        import torch

        torch.save(states, out)
    else:
        Path(out).write_text(json.dumps(states, indent=1))


def redistribute_files(paths: list[str], out: str, world_size: int, num_workers: int) -> int:
    """Re-cut the states in ``paths`` for ``world_size`` ranks; returns the number written."""
    states = redistribute(load_states(paths), world_size, num_workers)
    save_states(states, out)
    return len(states)
