"""Where a loader's workers run: ``worker_type`` names, checked once, and what each means.

Every worker type runs the same per-worker path
(:func:`stoker.runtime.worker_items.worker_items`: the same streams, positions and canonical
batch order), so a state saved under one restores under any other, to the same batches. They
differ only in where that path runs:

- ``"fork"`` / ``"spawn"`` / ``"forkserver"``: torch ``DataLoader`` worker processes started with
  that ``multiprocessing`` method; batches cross through shared memory
  (:mod:`stoker.pipeline.transport`). None (the default) takes ``multiprocessing``'s default
  method (``fork`` on Linux before Python 3.14).
- ``"thread"``: threads of the training process (:mod:`stoker.runtime.worker_threads`); no
  copy of the process, no transport. Fast where decoding releases the GIL (JPEG, numpy);
  slow where the per-sample Python work dominates (small text samples).
- ``"main"``: each worker's batches made inline, in the training loop's own thread, when they
  are asked for (debugging, profiling, tiny data).

Energon's worker classes (``ForkDataLoaderWorker``, ``ThreadDataLoaderWorker``) are accepted by
their names.

Example:
    >>> worker_type_name("thread"), worker_type_name(None)
    ('thread', None)
    >>> is_process("spawn"), is_process("thread"), is_process(None)
    (True, False, True)
    >>> worker_type_name("threads")
    Traceback (most recent call last):
    ...
    stoker.errors.ConfigError: worker_type='threads' is not a worker type. ...
"""

from __future__ import annotations

from stoker.errors import ConfigError

#: Worker processes started with that ``multiprocessing`` method.
PROCESS_TYPES = ("fork", "spawn", "forkserver")
THREAD = "thread"
MAIN = "main"
WORKER_TYPES = (*PROCESS_TYPES, THREAD, MAIN)
#: Energon's worker classes (its pull request #162), by class name.
ENERGON_NAMES = {"ForkDataLoaderWorker": "fork", "ThreadDataLoaderWorker": THREAD}


def worker_type_name(worker_type: object) -> str | None:
    """The worker type ``worker_type`` names (a name, Energon's worker class, or None)."""
    if worker_type is None:
        return None
    name = worker_type if isinstance(worker_type, str) else getattr(worker_type, "__name__", None)
    if isinstance(name, str):
        name = ENERGON_NAMES.get(name, name)
        if name in WORKER_TYPES:
            return name
    raise ConfigError(
        f"{worker_type=} is not a worker type.",
        hint=f"Use one of {', '.join(map(repr, WORKER_TYPES))} (or None: worker processes "
        "started the multiprocessing default way).",
    )


def is_process(worker_type: str | None) -> bool:
    """Whether workers of ``worker_type`` are processes."""
    return worker_type is None or worker_type in PROCESS_TYPES


__all__ = ["MAIN", "PROCESS_TYPES", "THREAD", "WORKER_TYPES", "is_process", "worker_type_name"]
