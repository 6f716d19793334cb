"""Energon's logical workers (its pull request #236) as names over stoker's virtual workers.

Energon partitions a dataset among its *physical* workers (ranks x dataloader workers), so the
order of the data changes with the topology. #236 lets a run fix the number of partitions,
``WorkerConfig(logical_workers=N)``: the data, its order and the samples' restore keys then
depend on ``N`` only. stoker always works that way: the plan is defined over ``virtual_workers``
streams (``get_train_dataset(virtual_workers=...)``) that the physical workers share out, and a
restore key names a sample by its place in the data, not by the worker that read it. So
``logical_workers=N`` sets the virtual workers to ``N`` where the caller sets none.

Where there are fewer partitions than physical workers (``physical = fanout x logical``), #236
lets ``fanout`` physical workers stride over one logical stream: physical worker ``p`` serves
logical worker ``p // fanout`` and keeps its outputs ``p % fanout``, ``p % fanout + fanout``, ...
(:meth:`LogicalWorkers.logical_assignment_for_physical`). Each of them runs the whole logical
stream; for the outputs it does not keep, the hooks marked
:func:`~stoker.pipeline.seeds.skip_safe` are left out (:mod:`stoker.runtime.logical_stride`).
stoker does the same (:func:`stride_of`). A state saved while striding restores on the same
topology (the fanout is part of the loader's streams).

Example:
    >>> LogicalWorkerAssignment(logical_global_worker_id=1, stride_offset=0, stride=2)
    LogicalWorkerAssignment(logical_global_worker_id=1, stride_offset=0, stride=2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError


@dataclass(frozen=True, slots=True)
class LogicalWorkerAssignment:
    """Which logical stream a physical worker serves, and which of its outputs it keeps."""

    #: The logical worker (partition) whose data the physical worker reads.
    logical_global_worker_id: int
    #: Which of the ``stride`` physical workers of that partition this one is.
    stride_offset: int = 0
    #: How many physical workers share the partition (each keeps every ``stride``-th output).
    stride: int = 1


class LogicalWorkers:
    """#236's ``WorkerConfig`` methods (a base of :class:`~stoker.WorkerConfig`)."""

    rank: int
    world_size: int
    num_workers: int
    logical_workers: int | None

    def check_logical_workers(self) -> None:
        """#236's rule: the logical workers divide the physical ones (ValueError otherwise)."""
        if self.logical_workers is None:
            return
        physical, logical = self.physical_worker_count(), self.logical_workers
        if not 1 <= logical <= physical or physical % logical:
            raise ConfigError(
                f"logical_workers={logical} must divide the {physical} physical workers "
                f"(world_size={self.world_size} x num_workers={self.num_workers}) and be at "
                "most their number.",
                hint="Or leave logical_workers unset and fix get_train_dataset(virtual_workers=N)"
                ", which stoker's physical workers share out whatever their number.",
            )

    def physical_worker_count(self) -> int:
        """Physical workers of all ranks (a rank without workers counts as one)."""
        return self.world_size * max(self.num_workers, 1)

    def physical_workers_per_rank(self) -> int:
        """Physical workers of one rank."""
        return max(self.num_workers, 1)

    def logical_worker_count(self) -> int:
        """Logical workers (partitions) of all ranks: ``logical_workers``, else the physical."""
        return (
            self.physical_worker_count() if self.logical_workers is None else self.logical_workers
        )

    def logical_workers_per_rank(self) -> int:
        """Logical workers of one rank (#236: they must split evenly over the ranks)."""
        logical = self.logical_worker_count()
        if logical % self.world_size:
            raise ConfigError(
                f"logical_workers={logical} do not split evenly over world_size={self.world_size}."
            )
        return logical // self.world_size

    def physical_global_worker_id(self, override_local_worker_id: int | None = None) -> int:
        """This (or ``override_local_worker_id``'s) physical worker among all ranks'."""
        if self.num_workers == 0:
            return self.rank
        local = (
            self.rank_worker_id() if override_local_worker_id is None else override_local_worker_id
        )
        return self.rank * self.num_workers + local

    def logical_assignment_for_physical(
        self, physical_global_worker_id: int
    ) -> LogicalWorkerAssignment:
        """The logical stream of physical worker ``physical_global_worker_id``."""
        physical = self.physical_worker_count()
        if not 0 <= physical_global_worker_id < physical:
            raise ConfigError(f"{physical_global_worker_id=} is not one of {physical} workers.")
        fanout = physical // self.logical_worker_count()
        return LogicalWorkerAssignment(
            physical_global_worker_id // fanout, physical_global_worker_id % fanout, fanout
        )

    def assignment_for_current_physical_worker(self) -> LogicalWorkerAssignment:
        """The logical stream of the physical worker running this code."""
        return self.logical_assignment_for_physical(self.physical_global_worker_id())

    def logical_global_worker_id(self, override_local_worker_id: int | None = None) -> int:
        """The logical worker (partition) of this physical worker, among all ranks'."""
        physical = self.physical_global_worker_id(override_local_worker_id)
        return self.logical_assignment_for_physical(physical).logical_global_worker_id

    def logical_local_worker_index(self, override_local_worker_id: int | None = None) -> int:
        """The logical worker of this physical worker, counted within its rank."""
        first = self.rank * self.logical_workers_per_rank()
        return self.logical_global_worker_id(override_local_worker_id) - first

    def rank_worker_id(self) -> int:  # the WorkerConfig's
        raise NotImplementedError


def stride_needed(config: Any) -> bool:
    """Whether #236 would stride: fewer logical workers than physical ones (Energon's
    ``_stride_needed``; see :func:`stride_of`)."""
    return bool(config.logical_worker_count() < config.physical_worker_count())


def virtual_workers_of(config: Any) -> int | None:
    """The virtual workers (plan streams) ``config.logical_workers`` asks for (None: not set)."""
    logical = getattr(config, "logical_workers", None)
    return None if logical is None else int(logical)


def stride_of(config: Any) -> int:
    """How many physical workers share one logical stream (#236's fanout; 1: none share)."""
    if getattr(config, "logical_workers", None) is None:
        return 1
    return int(config.physical_worker_count() // config.logical_worker_count())


__all__ = [
    "LogicalWorkerAssignment",
    "LogicalWorkers",
    "stride_needed",
    "stride_of",
    "virtual_workers_of",
]
