"""Energon's ``WorkerConfig(worker_debug_path=...)``: what each worker loaded, and when.

Every producer of batches (each worker process; the training process itself with
``num_workers=0``) writes one JSON line per batch it makes to its own file, named by
``worker_debug_path.format(worker_id=..., pid=...)`` as Energon names them: ``worker_id`` is
``rank * (num_workers + 1) + 1 + worker`` in a worker process and ``rank * (num_workers + 1)`` in
the training process. A line::

    {"t": "stoker.batch", "time": 1764000000.12, "rank": 0, "worker": 1, "stream": 3,
     "epoch": 0, "idx": 7, "keys": ["shard_000.tar/00012", ...]}

``idx`` counts this producer's batches in this pass; ``keys`` are the batch's ``__key__`` (absent
where the batch has none). The training process also writes, to its own file, one line per batch
its loop takes, under Energon's name for that line (so Energon's readers find the order of the
steps)::

    {"t": "SavableDataLoader.yield", "time": 1764000000.15, "r": 0, "w": null, "epoch": 0,
     "idx": 7, "keys": ["shard_000.tar/00012", ...]}

``idx`` counts the batches of this pass. ``stoker analyze-debug`` reads these files.

Example:
    >>> from stoker import WorkerConfig, get_loader, get_val_dataset
    >>> config = WorkerConfig(rank=0, world_size=1, num_workers=2,
    ...                       worker_debug_path="debug/worker_{worker_id}.jsonl")
    >>> ds = get_val_dataset("coco-wds", split_part="val", worker_config=config, batch_size=4)
    >>> with get_loader(ds) as loader:
    ...     batches = list(loader)
    >>> sorted(os.listdir("debug"))  # the training process (0) and its two workers (1, 2)
    ['worker_0.jsonl', 'worker_1.jsonl', 'worker_2.jsonl']
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
#: The ``t`` of a line of the training process: a batch its loop took (Energon's name).
YIELD_LINE = "SavableDataLoader.yield"


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


def debug_file(worker_config: Any, in_worker: bool, worker: int = 0) -> Path | None:
    """The debug file of a producer (None where ``worker_debug_path`` is not set)."""
    template = getattr(worker_config, "worker_debug_path", None)
    if template is None:
        return None
    rank = worker_config.rank
    worker_id = rank * (worker_config.num_workers + 1) + (1 + worker if in_worker else 0)
    try:
        return Path(template.format(worker_id=worker_id, pid=os.getpid()))
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(
            f"worker_debug_path={template!r} is not a valid format string ({e}).",
            hint="Only {worker_id} and {pid} may appear in braces.",
        ) from e


class _Lines:
    """JSON lines appended to a file opened at the first line, flushed one by one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    def write(self, line: dict[str, Any], batch: Any) -> None:
        keys = batch_keys(batch)
        if keys is not None:
            line["keys"] = keys
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (if one was opened)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class YieldLog(_Lines):
    """The training process's lines: one per batch its loop takes."""

    def __init__(self, path: Path, rank: int) -> None:
        super().__init__(path)
        self.rank = rank

    @classmethod
    def of(cls, worker_config: Any) -> YieldLog | None:
        """The training process's log (None where ``worker_debug_path`` is not set)."""
        path = debug_file(worker_config, in_worker=False)
        return None if path is None else cls(path, worker_config.rank)

    def yielded(self, epoch: int, idx: int, batch: Any) -> None:
        """Write the line of the ``idx``-th batch of pass ``epoch``."""
        line = {"t": YIELD_LINE, "time": time.time(), "r": self.rank, "w": None}
        self.write({**line, "epoch": epoch, "idx": idx}, batch)


class DebugLog(_Lines):
    """One producer's debug file, opened at its first batch."""

    def __init__(self, path: Path, rank: int, worker: int, epoch: int) -> None:
        super().__init__(path)
        self.rank, self.worker, self.epoch = rank, worker, epoch
        self.idx = 0

    @classmethod
    def of(cls, worker_config: Any, worker: int, epoch: int, *, in_worker: bool) -> DebugLog | None:
        """The debug log of ``worker`` (None where ``worker_debug_path`` is not set)."""
        path = debug_file(worker_config, in_worker, worker)
        return None if path is None else cls(path, worker_config.rank, worker, epoch)

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
        self.write(line, batch)
        self.idx += 1
