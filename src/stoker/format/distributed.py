"""``prepare`` and ``pack`` over many processes and machines, with ``torch.distributed``.

Every rank lists the same shards and takes its own share of them (:func:`assign_shards`, a pure
function of the rank); it writes its results to the shared dataset folder (the prepare work folder,
or temporary shard files), then all ranks meet, and rank 0 merges and publishes exactly as a
single-process run would, so the output is byte-identical. The process group comes from
``torchrun`` (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) or from SLURM's ``srun``
(``SLURM_PROCID``, ``SLURM_NTASKS``, with ``MASTER_ADDR`` exported by the job script).

Example:
    >>> assign_shards(["a.tar", "b.tar", "c.tar"], rank=1, world_size=2)
    ['b.tar']
    >>> init_distributed()  # outside torchrun and srun  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    stoker.errors.ConfigError: --distributed needs a process group: RANK and WORLD_SIZE...
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from stoker.errors import ConfigError, StokerError
from stoker.storage.options import DISTRIBUTED_TIMEOUT_ENV, env_seconds

T = TypeVar("T")

#: How long ranks wait for each other at a meeting point: the slowest rank's share of the shards
#: must be done by then. ``STOKER_DISTRIBUTED_TIMEOUT`` (seconds) overrides it.
DEFAULT_TIMEOUT_S = 24 * 3600


@dataclass(frozen=True)
class World:
    """This process's place among the ranks of a distributed prepare or pack."""

    rank: int
    size: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def assign_shards(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """The share of ``items`` that rank ``rank`` of ``world_size`` works on: every
    ``world_size``-th item from position ``rank`` (the same on every run)."""
    return list(items[rank::world_size])


def init_distributed() -> World:
    """Join (or reuse) the gloo process group that torchrun or srun describes."""
    import torch.distributed as dist

    if not dist.is_available():
        raise ConfigError("--distributed needs torch.distributed, which this torch lacks.")
    if not dist.is_initialized():
        _env_from_slurm()
        if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
            raise ConfigError(
                "--distributed needs a process group: RANK and WORLD_SIZE are not set.",
                hint="Start the command with `torchrun --nproc-per-node N -m stoker.cli ...`, "
                "or with `srun` (and MASTER_ADDR exported), or leave out --distributed.",
            )
        timeout = env_seconds(DISTRIBUTED_TIMEOUT_ENV, DEFAULT_TIMEOUT_S)
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
        # kept for later calls (pack, then prepare); a process must not exit with it open
        atexit.register(_destroy_process_group)
    return World(dist.get_rank(), dist.get_world_size())


@contextlib.contextmanager
def distributed_world(world: World | None = None) -> Iterator[World]:
    """``world``, or the process group of :func:`init_distributed`, for a ``with`` block."""
    yield world if world is not None else init_distributed()


def _destroy_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def _env_from_slurm() -> None:
    env = os.environ
    if "RANK" in env or "SLURM_PROCID" not in env or "SLURM_NTASKS" not in env:
        return
    if "MASTER_ADDR" not in env:
        raise ConfigError(
            "under srun, --distributed needs MASTER_ADDR: the host of rank 0.",
            hint="In the job script: export MASTER_ADDR=$(scontrol show hostnames "
            '"$SLURM_JOB_NODELIST" | head -n 1); export MASTER_PORT=29500',
        )
    env["RANK"] = env["SLURM_PROCID"]
    env["WORLD_SIZE"] = env["SLURM_NTASKS"]
    env.setdefault("LOCAL_RANK", env.get("SLURM_LOCALID", "0"))
    env.setdefault("MASTER_PORT", "29500")


def check_all(world: World, error: BaseException | None) -> None:
    """Meet every rank; raise on every rank if any failed (its own error where it failed)."""
    import torch.distributed as dist

    message = None if error is None else f"{type(error).__name__}: {error}"
    gathered: list[str | None] = [None] * world.size
    dist.all_gather_object(gathered, message)
    if error is not None:
        raise error
    failed = [(rank, text) for rank, text in enumerate(gathered) if text is not None]
    if failed:
        rank, text = failed[0]
        raise StokerError(
            f"rank {rank} of {world.size} failed ({len(failed)} rank(s) in all): {text}",
            hint="Fix that rank's error and start the same command again: finished shards are "
            "kept and not done again.",
        )


def run_step(world: World, step: Callable[[], T]) -> T:
    """Run ``step`` on this rank, then meet all ranks; raises everywhere if any rank failed."""
    try:
        result = step()
    except Exception as e:
        check_all(world, e)
        raise
    check_all(world, None)
    return result


def on_main_rank(world: World, step: Callable[[], T]) -> T:
    """Run ``step`` on rank 0 only and hand its result to every rank (or its error)."""
    import torch.distributed as dist

    result: list[T | None] = [None]
    if world.is_main:
        result[0] = run_step(world, step)
    else:
        run_step(world, lambda: None)
    dist.broadcast_object_list(result, src=0)
    return result[0]  # type: ignore[return-value]


def gather(world: World, value: T) -> list[T]:
    """Every rank's ``value``, in rank order, on every rank."""
    import torch.distributed as dist

    gathered: list[T | None] = [None] * world.size
    dist.all_gather_object(gathered, value)
    return gathered  # type: ignore[return-value]


def rank_label(world: World | None) -> str:
    """``rank 2/8: `` for progress lines, or nothing in a single process."""
    return "" if world is None or world.size == 1 else f"rank {world.rank}/{world.size}: "
