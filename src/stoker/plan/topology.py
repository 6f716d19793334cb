"""Who produces which micro-batch: virtual workers (streams) over ranks and dataloader workers.

The plan is defined over ``V`` virtual workers, fixed at the first run. Global micro-batch ``j``
is produced by stream ``j % V``. With ``W`` ranks, rank ``r`` takes the global micro-batches
``j = t * W + r`` (``t`` = its local micro-batch index), i.e. the streams ``r, r + W, r + 2W, ...``
(local stream ``k = t mod (V / W)``). Dataloader worker ``w`` of ``N`` owns the local streams with
``k ≡ w (mod N)`` and produces the rank's micro-batches with ``t ≡ w (mod N)``.

Because the stream of global micro-batch ``j`` is ``j % V`` whatever ``W`` and ``N`` are, a run can
resume on any topology with ``W * N`` dividing ``V`` and see the same global batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stoker.errors import ConfigError


def default_virtual_workers(world_size: int, num_workers: int) -> int:
    """``world_size * max(num_workers, 1)``: the smallest valid number of virtual workers.

    A larger value with many divisors (e.g. 2520 = lcm(1..10)) lets a run later resume on many
    more topologies (every ``W * N`` that divides it), at the cost of more, smaller streams.

    Example:
        >>> default_virtual_workers(8, 4), default_virtual_workers(2, 0)
        (32, 2)
    """
    return world_size * max(num_workers, 1)


@dataclass(frozen=True)
class Topology:
    """Where this process sits: ``rank`` of ``world_size``, with ``num_workers`` loader workers.

    ``num_workers == 0`` means loading in the main process; it behaves like one worker.

    Example:
        >>> topo = Topology(virtual_workers=8, world_size=2, rank=1, num_workers=2)
        >>> topo.rank_streams().tolist(), topo.worker_streams(1).tolist()
        ([1, 3, 5, 7], [3, 7])
        >>> [topo.stream_of(t) for t in range(5)], topo.worker_of(3), topo.batch_number(5)
        ([1, 3, 5, 7, 1], 1, 1)
    """

    virtual_workers: int
    world_size: int
    rank: int
    num_workers: int

    def __post_init__(self) -> None:
        v, w, r, n = self.virtual_workers, self.world_size, self.rank, self.num_workers
        if w < 1:
            raise ConfigError(f"world_size={self.world_size} must be >= 1.")
        if n < 0:
            raise ConfigError(
                f"num_workers={self.num_workers} must be >= 0 (0 = load in the main process)."
            )
        if not 0 <= r < w:
            raise ConfigError(f"rank={self.rank} must be in [0, world_size={w}).")
        if v < 1 or v % (w * max(n, 1)):
            raise ConfigError(
                f"virtual_workers={self.virtual_workers} must be a positive multiple of "
                "world_size * "
                f"max(num_workers, 1) = {w * max(n, 1)}; pick virtual_workers divisible by it "
                f"(see default_virtual_workers) or change the world size / worker count."
            )

    @property
    def workers(self) -> int:
        """Number of dataloader workers that actually produce data (``num_workers`` or 1)."""
        return max(self.num_workers, 1)

    @property
    def streams_per_rank(self) -> int:
        """``V / W``: how many streams each rank owns."""
        return self.virtual_workers // self.world_size

    def rank_streams(self) -> NDArray[np.int64]:
        """This rank's streams ``r, r + W, ...`` in local order ``k = 0 .. V/W - 1``."""
        return np.arange(self.rank, self.virtual_workers, self.world_size, dtype=np.int64)

    def worker_streams(self, worker: int) -> NDArray[np.int64]:
        """The streams of dataloader ``worker``: local streams with ``k ≡ worker (mod N)``."""
        if not 0 <= worker < self.workers:
            raise ConfigError(f"{worker=} must be in [0, {self.workers}).")
        return self.rank_streams()[worker :: self.workers]

    def stream_of(self, t: int) -> int:
        """The stream producing this rank's ``t``-th micro-batch: ``(t * W + r) % V``."""
        return (t * self.world_size + self.rank) % self.virtual_workers

    def worker_of(self, t: int) -> int:
        """The dataloader worker producing this rank's ``t``-th micro-batch: ``t mod N``."""
        return t % self.workers

    def batch_number(self, t: int) -> int:
        """How many micro-batches ``stream_of(t)`` produced before this one: ``t // (V / W)``."""
        return t // self.streams_per_rank
