"""What ``stoker bench`` measures besides time: process-tree memory, batch sizes, loader stats.

:class:`PeakRss` samples the resident memory of this process and all its children (the loader's
workers) from a background thread; :func:`batch_len` counts the samples of a batch whatever its
type; :func:`read_stats` turns what a loader's ``stats()`` returns (when it has one) into the few
figures the bench shows.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Mapping
from typing import Any


class PeakRss:
    """Peak resident memory (bytes) of this process plus its children, sampled every ``interval``.

    Resident sizes are added up, so pages shared between the main process and forked workers
    count once per process: the figure is an upper bound of what the tree needs. Without
    ``psutil`` (the ``bench`` extra) :attr:`peak` stays ``None``.

    Example:
        >>> with PeakRss() as rss:
        ...     pass
        >>> rss.peak is None or rss.peak > 0
        True
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stoker-bench-rss", daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        me = psutil.Process(os.getpid())
        while True:
            total = _tree_rss(me, psutil)
            if total is not None and (self.peak is None or total > self.peak):
                self.peak = total
            if self._stop.wait(self.interval):
                return


def _tree_rss(process: Any, psutil: Any) -> int | None:
    try:
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for member in members:
        try:
            total += int(member.memory_info().rss)
        except psutil.Error:  # a worker that exited between listing and reading
            continue
    return total


def batch_len(batch: Any, default: int) -> int:
    """Samples in ``batch``: the length of its ``__key__`` list, or of the batch itself.

    Example:
        >>> batch_len({"__key__": ["a", "b", "c"], "txt": ["x", "y", "z"]}, 16)
        3
        >>> batch_len(object(), 16)
        16
    """
    keys = batch.get("__key__") if isinstance(batch, Mapping) else getattr(batch, "__key__", None)
    if isinstance(keys, (list, tuple)):
        return len(keys)
    if isinstance(batch, (list, tuple)):
        return len(batch)
    return default


@dataclasses.dataclass(frozen=True)
class StatsView:
    """The figures of a loader's ``stats()`` that the bench shows (None where it has none)."""

    bottleneck: str | None = None
    stage_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    wait_frac: float | None = None
    skipped: int | None = None
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)


_BOTTLENECK = ("bottleneck", "bottleneck_stage")
_STAGES = ("stage_seconds", "stages", "stage_time", "per_stage")
_WAIT = ("data_wait_frac", "wait_frac", "data_wait")
_SKIPS = ("skipped", "skips")


def read_stats(loader: Any) -> StatsView | None:
    """The bench's view of ``loader.stats()``; None when the loader has no ``stats``.

    ``stats()`` may return a mapping or a dataclass. Read are: the bottleneck stage
    (``bottleneck``), seconds per stage (``stage_seconds`` or ``stages``: stage -> seconds, or
    stage -> ``{"seconds": ...}``), the data-wait fraction (``data_wait_frac``, or
    ``data_wait`` as a number or ``{"fraction": ...}``) and skips (``skipped``: a count, or
    reason -> count).

    Example:
        >>> class Loader:
        ...     def stats(self):
        ...         stages = {"read": 1.0, "decode": {"seconds": 3}}
        ...         return {"bottleneck": "decode", "stages": stages}
        >>> view = read_stats(Loader())
        >>> view.bottleneck, view.stage_seconds
        ('decode', {'read': 1.0, 'decode': 3.0})
    """
    stats = getattr(loader, "stats", None)
    if not callable(stats):
        return None
    raw = stats()
    if dataclasses.is_dataclass(raw) and not isinstance(raw, type):
        raw = dataclasses.asdict(raw)
    if not isinstance(raw, Mapping):
        return StatsView(raw={"stats": repr(raw)})
    data = dict(raw)
    bottleneck = _first(data, _BOTTLENECK)
    return StatsView(
        bottleneck=None if bottleneck is None else str(bottleneck),
        stage_seconds=_stages(_first(data, _STAGES)),
        wait_frac=_number(_first(data, _WAIT), ("fraction", "total_frac", "frac", "total")),
        skipped=_count(_first(data, _SKIPS)),
        raw=data,
    )


def _first(data: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    return next((data[name] for name in names if data.get(name) is not None), None)


def _number(value: Any, keys: tuple[str, ...] = ("seconds", "total_s", "total")) -> float | None:
    if isinstance(value, Mapping):
        value = _first(value, keys)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _stages(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    stages = {str(name): _number(v) for name, v in value.items()}
    return {name: seconds for name, seconds in stages.items() if seconds is not None}


def _count(value: Any) -> int | None:
    if isinstance(value, Mapping):
        return sum(int(v) for v in value.values() if isinstance(v, (int, float)))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return None
