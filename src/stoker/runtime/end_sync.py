"""The end of a finite pass across ranks: every rank hands out the same number of batches.

With ``repeat=False`` (validation, a final pass) the ranks run out of data at different times. A
rank whose loop ends while the others still train leaves them waiting in their next collective
call: the job hangs. Under ``torch.distributed`` the loaders of the data-parallel ranks agree
instead, per batch, with one ``all_reduce`` of one byte, whether every rank has a batch, and they
all end the pass at the same step. ``sync_end=`` chooses what happens to the batches the longer
ranks have left (Energon's pull request #146 names the last two):

- ``"equal"`` (the default for a finite dataset): the pass ends for every rank at the first step
  where one rank has no batch. The batches the other ranks have left are read and dropped, and
  counted in :attr:`EndSync.dropped`; every pass starts from the beginning on every rank.
- ``"stop_first"`` (Energon's ``StopFirstLoader``): the same step count, but a rank with batches
  left keeps them: its next pass continues where it stopped and, where its data ends in the
  middle of that pass, starts its next epoch without stopping. A rank that ran out starts anew.
- ``"redistribute"``: after the first rank runs out, the ranks
  with batches left read them all and send them (point to point) to the ranks without, until
  every rank has the same number; the fewer than ``world_size`` left over are handed out first
  in the next pass (kept in memory: a state saved in the shared tail resumes after it).
- ``"redistribute_rounds"`` (what Energon's ``RedistributeLoader`` does): after the first rank
  runs out, one global batch at a time, read by the ranks that have read the fewest extra
  batches (:mod:`stoker.runtime.end_sync_rounds`).
- ``None``: no agreement; each rank ends when its own data does.

Nothing hangs in any mode: every rank makes the same collective calls in the same order, and a
rank makes them only while its loop asks for a batch. Without ``torch.distributed`` (or with one
rank, or ``repeat=True``) nothing is exchanged.

Example:
    >>> plan_transfers([3, 0, 1], rounds=1)  # rank 0 gives one batch to rank 1
    [(0, 1, 1)]
    >>> plan_transfers([5, 0, 0, 3], rounds=2)
    [(0, 2, 1), (0, 3, 1), (0, 4, 2), (3, 2, 2)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError
from stoker.runtime.end_sync_rounds import ROUNDS, Rounds

if TYPE_CHECKING:
    from stoker.runtime.loader import Loader

#: The values of ``sync_end=`` (``"auto"``: ``"equal"`` for a finite dataset, else None).
MODES = ("equal", "stop_first", "redistribute", ROUNDS)


def plan_transfers(counts: list[int], rounds: int) -> list[tuple[int, int, int]]:
    """Who sends which batch to whom so that every rank holds ``rounds`` batches: a list of
    ``(source rank, index in its pool, destination rank)``. Each rank keeps its first
    ``rounds`` batches; the rest go, in rank order, to the ranks short of ``rounds``."""
    surplus = [(r, i) for r, c in enumerate(counts) for i in range(rounds, c)]
    transfers = []
    for dst, count in enumerate(counts):
        for _ in range(max(rounds - count, 0)):
            src, index = surplus.pop(0)
            transfers.append((src, index, dst))
    return transfers


class _Snapshot:
    """A loader's position before one batch, to step back to (``"stop_first"``)."""

    def __init__(self, loader: Loader) -> None:
        self.t, self.yielded = loader.t, loader.yielded
        self.exhausted = set(loader.exhausted)
        self.positions, self.buffers = dict(loader.positions), dict(loader.buffers)

    def restore(self, loader: Loader) -> None:
        loader._stop()  # its workers are ahead of the position restored
        loader.t, loader.yielded = self.t, self.yielded
        loader.exhausted = self.exhausted
        loader.positions, loader.buffers = self.positions, self.buffers


class EndSync:
    """How a loader ends a finite pass with the other ranks (see module)."""

    def __init__(self, mode: str | None, loader: Loader) -> None:
        if mode == "auto":
            mode = "equal" if _finite(loader.dataset) else None
        if mode is not None and mode not in MODES:
            raise ConfigError(
                f"sync_end={mode!r} is not a way to end a pass across ranks.",
                hint=f"Use one of {', '.join(map(repr, MODES))}, 'auto' or None.",
            )
        self.mode = mode
        self.group = loader.dataset.worker_config.data_parallel_group
        #: Batches read and not handed out to keep the ranks equal (``"equal"``), all passes.
        self.dropped = 0
        #: Whether the pass just ended is over for this rank (else its next one continues it).
        self.finished = True
        #: ``"stop_first"``: this rank's pass began at the start of its data.
        self.from_start = True
        #: Batches to hand out before reading more (``"redistribute"``'s left over, its tail).
        self.pending: list[Any] = []
        self._tail: list[Any] | None = None
        #: ``"redistribute_rounds"``'s own state and steps.
        self.rounds = Rounds(self.group, loader) if mode == ROUNDS else None

    def active(self) -> bool:
        """Whether the ranks must agree: a mode, and ``torch.distributed`` with >1 ranks."""
        if self.mode is None:
            return False
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized() and dist.get_world_size(self.group) > 1

    def advance(self, loader: Loader) -> bool:
        """Like ``loader._advance()`` (the next batch into ``loader._batch``), agreed with
        the other ranks."""
        self.finished = True
        if not self.active():
            return loader._advance()
        if self.rounds is not None:
            return self.rounds.advance(loader)
        if self._tail is not None:  # redistribute: the shared tail, no more agreement needed
            if self._tail:
                loader._batch = self._tail.pop(0)
                return True
            self._tail = None
            return False
        snapshot = _Snapshot(loader) if self.mode == "stop_first" else None
        has = self._local(loader)
        if self._all(has):
            return True
        if self.mode == "equal":
            if has:
                self.dropped += 1 + len(_drain(loader))
            return False
        if self.mode == "stop_first":
            if has and snapshot is not None:
                snapshot.restore(loader)  # handed out first in the next pass
                self.pending.clear()
            self.finished = self.from_start = not has
            return False
        pool = [loader._batch, *_drain(loader)] if has else []
        self._tail = self._share(pool)
        return self.advance(loader)

    def _local(self, loader: Loader) -> bool:
        if self.pending:
            loader._batch = self.pending.pop(0)
            return True
        if loader._advance():
            return True
        if self.mode == "stop_first" and not self.from_start:  # continue into the next epoch
            loader._stop()
            loader._next_pass()
            self.from_start = True
            return loader._advance()
        return False

    def _all(self, has: bool) -> bool:
        import torch
        import torch.distributed as dist

        flag = torch.tensor([int(has)], dtype=torch.uint8, device=_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.group)
        return bool(flag.item())

    def _share(self, pool: list[Any]) -> list[Any]:
        """Exchange ``pool`` (this rank's batches left) so that every rank holds as many; the
        batches this rank hands out in the tail. Its left over go to :attr:`pending`."""
        import torch.distributed as dist

        world, rank = dist.get_world_size(self.group), dist.get_rank(self.group)
        counts: list[Any] = [None] * world
        dist.all_gather_object(counts, len(pool), group=self.group)
        rounds = sum(counts) // world
        mine, sent = pool[:rounds], set()
        for src, index, dst in plan_transfers(counts, rounds):
            if src == rank:
                dist.send_object_list([pool[index]], dst=self._global(dst))
                sent.add(index)
            elif dst == rank:
                box: list[Any] = [None]
                dist.recv_object_list(box, src=self._global(src))
                mine.append(box[0])
        self.pending = [b for i, b in enumerate(pool[rounds:], rounds) if i not in sent]
        return mine

    def _global(self, rank: int) -> int:
        import torch.distributed as dist

        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    def state(self) -> dict[str, Any]:
        """What a wrapper saves beside the loader's state (``"stop_first"``)."""
        state: dict[str, Any] = {"mode": self.mode, "from_start": self.from_start}
        if self.rounds is not None:
            state["rounds"] = self.rounds.state()
        return state

    def restore(self, state: dict[str, Any] | None) -> None:
        if state is not None:
            self.from_start = bool(state.get("from_start", True))
        self.pending, self._tail = [], None
        if self.rounds is not None:
            self.rounds.restore(None if state is None else state.get("rounds"))


def _drain(loader: Loader) -> list[Any]:
    """The batches left in the loader's pass (read now)."""
    out = []
    while loader._advance():
        out.append(loader._batch)
    return out


def _device() -> str:
    import torch.distributed as dist

    return "cuda" if dist.get_backend() == "nccl" else "cpu"


def _finite(dataset: Any) -> bool:
    """Whether ``dataset`` (or what it wraps) was made with ``repeat=False``."""
    for _ in range(32):
        repeat = getattr(dataset, "repeat", None)
        if isinstance(repeat, bool):
            return not repeat
        dataset = getattr(dataset, "dataset", None)
        if dataset is None:
            return False
    return False


__all__ = ["MODES", "EndSync", "plan_transfers"]
