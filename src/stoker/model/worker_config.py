"""``WorkerConfig``: where this process sits in the cluster (rank, world size, workers)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError
from stoker.model.logical_workers import LogicalWorkers
from stoker.pipeline.sample_failure import ErrorHandler, log_exception, reraise_exception

#: The default of ``rank`` and ``world_size``: taken from ``torch.distributed`` (else 0 of 1).
AUTO = -1


def _distributed_rank(group: Any) -> tuple[int, int]:
    """``(rank, world_size)`` in ``group`` where ``torch.distributed`` is initialised, else
    ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


@dataclass(frozen=True, eq=False)
class WorkerConfig(LogicalWorkers):
    """Data-parallel topology of the loader, as in Energon.

    Args:
        rank: This process's data-parallel rank (default: ``torch.distributed``'s rank in
            ``data_parallel_group`` where it is initialised, else 0).
        world_size: Number of data-parallel ranks (default: ``torch.distributed``'s, else 1).
        num_workers: Dataloader worker processes per rank (0 loads in the main process;
            default 4, as :meth:`default_worker_config`).
        data_parallel_group: The ``torch.distributed`` group of the data-parallel ranks, used to
            gather and scatter loader states (None: the default group).
        seed_offset: Changes every random choice of the loader (another sample order).
        worker_debug_path: Write one JSON line per batch (time, worker, stream, keys) to this
            path, formatted with ``{worker_id}`` / ``{pid}`` per producer as Energon's (see
            :mod:`stoker.runtime.debug_log`; ``stoker analyze-debug`` reads them).
        worker_log_level: Accepted for Energon compatibility.
        global_error_handler: ``handler(exception, sample, sources)`` called when a sample fails
            to load or encode (Energon's): :func:`~stoker.log_exception` (the default) logs and
            skips, :func:`~stoker.reraise_exception` stops; another handler raises to stop or
            returns to skip. An ``error_policy=`` given to ``get_*_dataset`` takes precedence.
        restore_error_handler: Accepted for Energon compatibility (a restore re-raises).
        prefetch_factor: The default of ``get_loader(prefetch_factor=...)``: batches each
            worker prepares ahead (None: 2).
        persistent_workers: Accepted as in PyTorch's ``DataLoader``: a stoker loader keeps its
            worker processes for the whole of one ``for`` loop (forever on a repeating
            dataset), so there is nothing to switch.
        logical_workers: Energon's logical workers (its #236): the partitions of the data, which
            fix its order whatever the topology; stoker's virtual workers (see
            :mod:`stoker.model.logical_workers`). None: one per physical worker.

    As in Energon, two configs are equal when rank, world size and workers are.

    Example:
        >>> WorkerConfig(rank=0, world_size=1, num_workers=2).config()
        {'rank': 0, 'world_size': 1, 'num_workers': 2, 'data_parallel_group': None}
        >>> WorkerConfig(num_workers=8, prefetch_factor=2, persistent_workers=True).world_size
        1
    """

    rank: int = AUTO
    world_size: int = AUTO
    num_workers: int = 4
    data_parallel_group: Any = None
    seed_offset: int = 0
    worker_debug_path: str | None = None
    worker_log_level: int = 0
    global_error_handler: ErrorHandler = log_exception
    restore_error_handler: ErrorHandler = reraise_exception
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    logical_workers: int | None = None

    def __post_init__(self) -> None:
        if self.rank == AUTO or self.world_size == AUTO:
            rank, world_size = _distributed_rank(self.data_parallel_group)
            if self.rank == AUTO:
                object.__setattr__(self, "rank", rank)
            if self.world_size == AUTO:
                object.__setattr__(self, "world_size", world_size)
        if self.prefetch_factor is not None and not (
            isinstance(self.prefetch_factor, int) and self.prefetch_factor >= 1
        ):
            raise ConfigError(f"prefetch_factor={self.prefetch_factor!r} must be >= 1 or None.")
        if self.world_size < 1:
            raise ConfigError(f"world_size={self.world_size} must be at least 1.")
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank={self.rank} must be in [0, world_size={self.world_size}).")
        if self.num_workers < 0:
            raise ConfigError(
                f"num_workers={self.num_workers} must be >= 0 (0 loads in the main process)."
            )
        self.check_logical_workers()

    @staticmethod
    def default_worker_config(
        num_workers: int = 4, data_parallel_group: Any = None
    ) -> WorkerConfig:
        """Rank and world size from ``torch.distributed`` when it is initialised, else 0 of 1."""
        rank, world_size = _distributed_rank(data_parallel_group)
        return WorkerConfig(
            rank=rank,
            world_size=world_size,
            num_workers=num_workers,
            data_parallel_group=data_parallel_group,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Process groups cannot cross process boundaries; dataloader workers do not need one.
        fields = (self.rank, self.world_size, self.num_workers, None, self.seed_offset,
                  self.worker_debug_path, self.worker_log_level, self.global_error_handler,
                  self.restore_error_handler, self.prefetch_factor,
                  self.persistent_workers, self.logical_workers)  # fmt: skip
        return (WorkerConfig, fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkerConfig):
            return NotImplemented
        return self._topology() == other._topology()

    def __hash__(self) -> int:
        return hash(self._topology())

    def _topology(self) -> tuple[int, int, int, int | None]:
        return (self.rank, self.world_size, self.num_workers, self.logical_workers)

    def config(self) -> dict[str, Any]:
        """A dict describing the topology (Energon's ``config()``, e.g. for logs and checks)."""
        group = self.data_parallel_group
        config = {
            "rank": self.rank,
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "data_parallel_group": group.size() if group is not None else None,
        }
        if self.logical_workers is not None:  # #236's key, where it is used
            config["logical_workers"] = self.logical_workers
        return config

    def rank_worker_id(self) -> int:
        """This process's dataloader worker id on its rank (0 in the main process)."""
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        return 0 if info is None else int(info.id)

    def global_worker_id(self, override_local_worker_id: int | None = None) -> int:
        """``rank * num_workers + worker id`` (Energon's numbering of all workers)."""
        local = (
            self.rank_worker_id() if override_local_worker_id is None else override_local_worker_id
        )
        return self.rank * self.num_workers + local

    def worker_seed(self, override_local_worker_id: int | None = None) -> int:
        """A 32-bit seed for this worker, from its global id and ``seed_offset`` (as Energon)."""
        worker = (
            self.rank if self.num_workers == 0 else self.global_worker_id(override_local_worker_id)
        )
        digest = hashlib.sha1(f"{worker},{self.seed_offset}".encode()).digest()
        return int.from_bytes(digest, "big") & 0xFFFFFFFF

    def global_rank(self) -> int:
        """This rank in the default process group (``rank`` without a data-parallel group)."""
        if self.data_parallel_group is None:
            return self.rank
        import torch.distributed as dist

        return int(dist.get_global_rank(self.data_parallel_group, self.rank))

    def should_log(self, level: int) -> bool:
        """Whether ``worker_log_level`` asks for messages of ``level`` (Energon's)."""
        return level <= self.worker_log_level

    def worker_activate(self, local_worker_id: int = 0, activation_count: int = 0) -> None:
        """Accepted for Energon compatibility: Energon marks a class-wide active config before
        a dataset is iterated by hand; a stoker dataset knows its worker without it."""
        if not 0 <= local_worker_id < max(self.num_workers, 1):
            raise ValueError(f"{local_worker_id=} is not a worker of {self.num_workers=}.")

    def worker_deactivate(self) -> None:
        """Accepted for Energon compatibility (see :meth:`worker_activate`)."""

    def fingerprint(self) -> dict[str, int]:
        """The fields that shape the sample order (for checkpoint fingerprints)."""
        return {
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "seed_offset": self.seed_offset,
        }
