"""The loader's ``stats()`` and ``global_stats()``: a mixin of
:class:`~stoker.runtime.loader.Loader`."""

from __future__ import annotations

from typing import Any

from stoker.runtime.stats import StatsCollector
from stoker.runtime.stats_log import StatsLog, check_every
from stoker.runtime.stats_view import LoaderStats, target_shares


class LoaderMeasures:
    """``stats()`` / ``global_stats()`` over the loader's :class:`StatsCollector`."""

    dataset: Any
    #: Batches this rank has handed out (the loader's counter, restored with its state).
    t: int
    _stats: StatsCollector
    #: The ``log_stats_every`` line logger (None: off); ticked by the loader per batch.
    _stats_log: StatsLog | None = None

    def samples_per_dataset(self, *, this_pass: bool = False) -> dict[str, int]:
        raise NotImplementedError

    def stats(self, *, reset: bool = False) -> LoaderStats:
        """Is the run data-bound, and why? Figures of this loader (this rank) so far.

        Added up in this process from what the workers send with their batches (no extra
        message): batches and samples handed out and their rate, the fraction of time the loop
        waited in ``next()``, seconds per worker stage and the ``bottleneck`` stage, skips by
        reason and dataset, realised blend shares vs their targets (under weight schedules: the
        scheduled share over the same global batches), storage requests, bytes,
        retries and read-ahead hits, shared-memory slots and worker memory. Workers report at
        most every 0.25 s, so stage times may lag a little behind the counts.

        Args:
            reset: Start counting afresh after this call (for one log line per interval).

        Example:
            >>> batches = list(loader)
            >>> stats = loader.stats(reset=True)
            >>> stats.batches, stats.samples, 0 <= stats.recent_wait_frac <= 1
            (3, 10, True)
        """
        datasets = self.samples_per_dataset()
        targets = target_shares(self.dataset, self._window_batches())
        return self._stats.snapshot(datasets, targets, reset=reset)

    def _window_batches(self) -> Any:
        """Global batch indices of the batches handed out since the start or the last reset
        (at most 4096 of them, evenly spread): rank ``r``'s ``t``-th batch is ``t * W + r``."""
        import numpy as np

        first = max(self.t - self._stats.batches, 0)
        if self.t <= first:
            return None
        topology = self.dataset.topology()
        t = np.unique(np.linspace(first, self.t - 1, min(self.t - first, 4096)).astype(np.int64))
        return t * topology.world_size + topology.rank

    def log_stats_every(self, every: float | None) -> None:
        """Log one line of this loader's figures every ``every`` seconds on the ``stoker``
        logger (INFO) while the loop iterates; None: off. Checked when the loop takes a batch.

        Example:
            >>> loader.log_stats_every(60)
            >>> loader.log_stats_every(None)  # off again
        """
        seconds = check_every(every)
        self._stats_log = None if seconds is None else StatsLog(seconds, self.stats)

    def global_stats(self, *, reset: bool = False) -> list[LoaderStats]:
        """:meth:`stats` of every rank, indexed by rank, gathered with ``torch.distributed``
        (every rank must call it; without an initialised process group: this rank's only).

        Example:
            >>> waits = [s.recent_wait_frac for s in loader.global_stats()]
            >>> len(waits)  # no process group here: this rank only
            1
        """
        import torch.distributed as dist

        mine = self.stats(reset=reset)
        if not (dist.is_available() and dist.is_initialized()):
            return [mine]
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        return [s for s in gathered if isinstance(s, LoaderStats)]
