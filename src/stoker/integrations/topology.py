"""The data-parallel rank a loader should use under model parallelism.

With tensor, pipeline or context parallelism, several processes train one data-parallel replica
and must receive *identical* batches. The loader's rank is therefore the pure data-parallel rank
(Megatron's ``get_data_parallel_rank()``, without context parallelism), not the global rank: the
context-parallel peers of a replica split each sequence between them, so they need the same data.

Sources, first that applies:

1. a Megatron ``ProcessGroupCollection`` passed explicitly: its ``dp`` group (or that of any
   object whose ``.dp`` has ``.rank()`` and ``.size()``, as ``torch.distributed`` groups do);
2. Megatron's ``parallel_state``, when the program initialised it (never imported here: if
   Megatron's model parallelism is initialised, the program imported it already);
3. ``torch.distributed``: every process is its own replica;
4. a single process.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

from stoker.model.worker_config import WorkerConfig

logger = logging.getLogger("stoker")


@dataclass(frozen=True)
class DataParallelPlace:
    """Where this process sits among the data-parallel replicas.

    Example:
        >>> DataParallelPlace(rank=1, world_size=2, group=None, source="pg_collection")
        DataParallelPlace(rank=1, world_size=2, group=None, source='pg_collection')
    """

    rank: int
    world_size: int
    #: The process group of the data-parallel ranks (None: the default group, or no group).
    group: Any
    #: Where the rank came from: pg_collection, megatron, torch.distributed or single-process.
    source: str


def data_parallel_place(pg_collection: Any = None) -> DataParallelPlace:
    """The pure data-parallel rank and size of this process (see the module docstring).

    Example:
        >>> data_parallel_place().source  # no torch.distributed initialised here
        'single-process'
    """
    if pg_collection is not None and getattr(pg_collection, "dp", None) is not None:
        dp = pg_collection.dp
        return DataParallelPlace(dp.rank(), dp.size(), dp, "pg_collection")
    parallel_state = sys.modules.get("megatron.core.parallel_state")
    if parallel_state is not None and parallel_state.model_parallel_is_initialized():
        return DataParallelPlace(
            parallel_state.get_data_parallel_rank(with_context_parallel=False),
            parallel_state.get_data_parallel_world_size(with_context_parallel=False),
            parallel_state.get_data_parallel_group(with_context_parallel=False),
            "megatron",
        )
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return DataParallelPlace(dist.get_rank(), dist.get_world_size(), None, "torch.distributed")
    return DataParallelPlace(0, 1, None, "single-process")


def data_parallel_worker_config(
    num_workers: int, *, pg_collection: Any = None, seed_offset: int = 0
) -> WorkerConfig:
    """A :class:`WorkerConfig` on the pure data-parallel rank (context-parallel peers share it).

    Example:
        >>> config = data_parallel_worker_config(2)  # no torch.distributed: rank 0 of 1
        >>> config.rank, config.world_size, config.num_workers
        (0, 1, 2)
    """
    place = data_parallel_place(pg_collection)
    logger.debug(
        "loader on data-parallel rank %d of %d (from %s)",
        place.rank,
        place.world_size,
        place.source,
    )
    return WorkerConfig(
        rank=place.rank,
        world_size=place.world_size,
        num_workers=num_workers,
        data_parallel_group=place.group,
        seed_offset=seed_offset,
    )
