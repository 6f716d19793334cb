"""``WorkerConfig``: where this process sits in the cluster (rank, world size, workers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError


@dataclass(frozen=True)
class WorkerConfig:
    """Data-parallel topology of the loader, as in Energon.

    Args:
        rank: This process's data-parallel rank.
        world_size: Number of data-parallel ranks.
        num_workers: Dataloader worker processes per rank (0 loads in the main process).
        data_parallel_group: The ``torch.distributed`` group of the data-parallel ranks, used to
            gather and scatter loader states (None: the default group).
        seed_offset: Changes every random choice of the loader (another sample order).
        worker_debug_path: Accepted for Energon compatibility; stoker logs through ``logging``.
        worker_log_level: Accepted for Energon compatibility.

    Example:
        >>> WorkerConfig(rank=0, world_size=1, num_workers=2)
        WorkerConfig(rank=0, world_size=1, num_workers=2, data_parallel_group=None, seed_offset=0, \
worker_debug_path=None, worker_log_level=0)
    """

    rank: int
    world_size: int
    num_workers: int
    data_parallel_group: Any = None
    seed_offset: int = 0
    worker_debug_path: str | None = None
    worker_log_level: int = 0

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ConfigError(f"{self.world_size=} must be at least 1.")
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"{self.rank=} must be in [0, world_size={self.world_size}).")
        if self.num_workers < 0:
            raise ConfigError(f"{self.num_workers=} must be >= 0 (0 loads in the main process).")

    @staticmethod
    def default_worker_config(
        num_workers: int = 4, data_parallel_group: Any = None
    ) -> WorkerConfig:
        """Rank and world size from ``torch.distributed`` when it is initialised, else 0 of 1."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank(data_parallel_group)
            world_size = dist.get_world_size(data_parallel_group)
        else:
            rank, world_size = 0, 1
        return WorkerConfig(
            rank=rank,
            world_size=world_size,
            num_workers=num_workers,
            data_parallel_group=data_parallel_group,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Process groups cannot cross process boundaries; dataloader workers do not need one.
        fields = (self.rank, self.world_size, self.num_workers, None, self.seed_offset,
                  self.worker_debug_path, self.worker_log_level)  # fmt: skip
        return (WorkerConfig, fields)

    def fingerprint(self) -> dict[str, int]:
        """The fields that shape the sample order (for checkpoint fingerprints)."""
        return {
            "world_size": self.world_size,
            "num_workers": self.num_workers,
            "seed_offset": self.seed_offset,
        }
