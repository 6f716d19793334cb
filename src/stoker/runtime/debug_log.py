"""Energon's ``WorkerConfig(worker_debug_path=...)``: what each worker loaded, and when.

Every producer of batches (each worker process; the training process itself with
``num_workers=0``) writes one JSON line per batch it makes to its own file, named by
``worker_debug_path.format(worker_id=..., pid=...)`` as Energon names them: ``worker_id`` is
``rank * (num_workers + 1) + 1 + worker`` in a worker process and ``rank * (num_workers + 1)`` in
the training process. A line::

    {"t": "stoker.batch", "time": 1764000000.12, "rank": 0, "worker": 1, "stream": 3,
     "epoch": 0, "idx": 7, "keys": ["shard_000.tar/00012", ...]}

``idx`` counts this producer's batches in this pass; ``keys`` are the batch's ``__key__`` (absent
where the batch has none). ``stoker analyze-debug`` reads these files.

Example:
    >>> config = WorkerConfig(rank=0, world_size=1, num_workers=2,  # doctest: +SKIP
    ...                       worker_debug_path="debug/worker_{worker_id}.jsonl")
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from stoker.errors import ConfigError

#: The ``t`` of a batch line.
BATCH_LINE = "stoker.batch"


def check_debug_path(worker_config: Any) -> None:
    """A :class:`ConfigError` where several producers would write one file (no placeholder)."""
    path = getattr(worker_config, "worker_debug_path", None)
    if path is None:
        return
    several = worker_config.num_workers > 0 or worker_config.world_size > 1
    if several and "{worker_id}" not in path and "{pid}" not in path:
        raise ConfigError(
            f"worker_debug_path={path!r} has no {{worker_id}} (or {{pid}}): every worker and "
            "rank would overwrite the same file.",
            hint='E.g. worker_debug_path="debug/worker_{worker_id}.jsonl".',
        )


def batch_keys(batch: Any) -> list[str] | None:
    """The sample keys of a batch (its ``__key__``/``__keys__``), or None."""
    if isinstance(batch, list) and batch:
        batch = batch[0]
    for name in ("__key__", "__keys__"):
        keys = batch.get(name) if isinstance(batch, dict) else getattr(batch, name, None)
        if isinstance(keys, str):
            return [keys]
        if isinstance(keys, (list, tuple)) and all(isinstance(k, str) for k in keys):
            return list(keys)
    return None


class DebugLog:
    """One producer's debug file, opened at its first batch."""

    def __init__(self, path: Path, rank: int, worker: int, epoch: int) -> None:
        self.path, self.rank, self.worker, self.epoch = path, rank, worker, epoch
        self.idx = 0
        self._file: TextIO | None = None

    @classmethod
    def of(cls, worker_config: Any, worker: int, epoch: int, *, in_worker: bool) -> DebugLog | None:
        """The debug log of ``worker`` (None where ``worker_debug_path`` is not set)."""
        template = getattr(worker_config, "worker_debug_path", None)
        if template is None:
            return None
        rank = worker_config.rank
        worker_id = rank * (worker_config.num_workers + 1) + (1 + worker if in_worker else 0)
        try:
            path = Path(template.format(worker_id=worker_id, pid=os.getpid()))
        except (KeyError, IndexError, ValueError) as e:
            raise ConfigError(
                f"worker_debug_path={template!r} is not a valid format string ({e}).",
                hint="Only {worker_id} and {pid} may appear in braces.",
            ) from e
        return cls(path, rank, worker, epoch)

    def batch(self, stream: int, batch: Any) -> None:
        """Write the line of one batch of ``stream``."""
        line: dict[str, Any] = {
            "t": BATCH_LINE,
            "time": time.time(),
            "rank": self.rank,
            "worker": self.worker,
            "stream": stream,
            "epoch": self.epoch,
            "idx": self.idx,
        }
        keys = batch_keys(batch)
        if keys is not None:
            line["keys"] = keys
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()
        self.idx += 1

    def close(self) -> None:
        """Close the file (if one was opened)."""
        if self._file is not None:
            self._file.close()
            self._file = None
