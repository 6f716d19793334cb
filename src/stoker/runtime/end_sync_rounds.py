"""``sync_end="redistribute_rounds"``: Energon's ``RedistributeLoader`` (its pull request #146).

Every rank hands out batches until the first runs out. From then on the ranks go round by round,
one global batch (one batch per rank) at a time:

1. The ranks say whether they are out of data and how many batches they hold.
2. While they hold fewer than ``world_size`` together, the ranks with data read more, one batch
   each in turn, starting with those that have read the fewest extra batches so far (each rank's
   *overuse* count; a rank out of data never reads again).
3. Each rank that holds none receives one, point to point, from a rank that holds more than one
   (taken from the last such rank first), and every rank hands out the first batch it holds.

The pass ends when every rank is out of data and a round cannot be filled; the batches the ranks
still hold (fewer than ``world_size`` together) are handed out first in the next pass. A saved
state holds this rank's flag, its overuse count and the restore keys of the batches it holds
(read again when the state is restored). Unlike ``"redistribute"``, which reads every rank's
rest at once and shares it out in rank order, a round reads only what it hands out.

The collective calls are the same on every rank in the same order (their arguments follow from
what every rank was told), so no rank waits for a call another never makes.

Example:
    >>> oversample([0, 1, 0], 1, rank=2), oversample([3, 1, 1], 3, rank=2)
    (([1, 1, 0], 0), ([3, 3, 2], 1))
    >>> share([3, 0, 0])  # rank 0 holds 3: its third goes to rank 1, its second to rank 2
    [(0, 2, 1), (0, 1, 2)]
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from stoker.pipeline.batching import restore_key_of

if TYPE_CHECKING:
    from stoker.runtime.loader import Loader

#: The mode's name (``sync_end=``).
ROUNDS = "redistribute_rounds"
#: A rank that is out of data never reads again: its overuse count is beyond any other.
OUT = 1 << 60


def oversample(overuse: list[int], needed: int, rank: int) -> tuple[list[int], int]:
    """The ranks with the fewest extra reads read ``needed`` batches, one each in rank order
    per turn: the new overuse counts and how many this ``rank`` reads."""
    overuse, mine = list(overuse), 0
    while needed > 0:
        fewest = min(overuse)
        for r, count in enumerate(overuse):
            if count != fewest:
                continue
            overuse[r] += 1
            mine += r == rank
            needed -= 1
            if needed == 0:
                break
    return overuse, mine


def share(counts: list[int]) -> list[tuple[int, int, int]]:
    """``(source rank, index of the batch it holds, destination rank)`` for each rank holding
    none: the last of the batches held beyond each rank's first goes first."""
    spare = [(r, i) for r, count in enumerate(counts) for i in range(1, count)]
    return [(*spare.pop(), dst) for dst, count in enumerate(counts) if count == 0]


class Rounds:
    """The state and steps of ``"redistribute_rounds"`` for one loader (see module)."""

    def __init__(self, group: Any, loader: Loader) -> None:
        self.group = group
        self._loader = weakref.ref(loader)  # (the loader holds this object)
        #: Batches this rank holds, handed out first (a round's rest, or the last pass's).
        self.held: list[Any] = []
        self.out = False  # this rank is out of data this pass
        self.overuse = 0  # extra batches this rank read for others this pass
        self._overuse: list[int] | None = None  # all ranks' (known once synced)
        self._any_out = False

    def advance(self, loader: Loader) -> bool:
        """The next batch into ``loader._batch`` (False: the pass is over for every rank)."""
        import torch.distributed as dist

        world, rank = dist.get_world_size(self.group), dist.get_rank(self.group)
        if self._overuse is None:  # the pass (or a restored state) starts: agree on it
            outs = self._gather(int(self.out))
            self._overuse = self._gather(self.overuse)
            self._any_out = any(outs)
        if not self._any_out:
            has = self._take(loader)
            if self._gather_min(int(has)):
                loader._batch = self.held.pop(0)
                return True
            self._any_out = True
        while True:
            outs = self._gather(int(self.out))
            if all(outs):
                self._end_pass()
                return False
            overuse = [OUT if o else count for o, count in zip(outs, self._overuse, strict=True)]
            counts = self._gather(len(self.held))
            if sum(counts) < world:
                self._overuse, mine = oversample(overuse, world - sum(counts), rank)
                if not self.out:
                    self.overuse = self._overuse[rank]
                for _ in range(mine):
                    if not self._read(loader):
                        break
                continue
            self._overuse = overuse
            self._exchange(share(counts), rank)
            loader._batch = self.held.pop(0)
            return True

    def _take(self, loader: Loader) -> bool:
        """Whether this rank has a batch to hand out: the first it holds, else one more read."""
        return bool(self.held) or self._read(loader)

    def _read(self, loader: Loader) -> bool:
        """Read one more batch into :attr:`held` (False: this rank is out of data)."""
        if self.out or not loader._advance():
            self.out = True
            return False
        self.held.append(loader._batch)
        return True

    def _exchange(self, transfers: list[tuple[int, int, int]], rank: int) -> None:
        import torch.distributed as dist

        sent = set()
        for src, index, dst in transfers:
            if src == rank:
                dist.send_object_list([self.held[index]], dst=self._global(dst))
                sent.add(index)
            elif dst == rank:
                box: list[Any] = [None]
                dist.recv_object_list(box, src=self._global(src))
                self.held.append(box[0])
        self.held = [b for i, b in enumerate(self.held) if i not in sent]

    def _end_pass(self) -> None:
        self.out, self.overuse, self._overuse, self._any_out = False, 0, None, False

    def _gather(self, value: int) -> list[int]:
        import torch
        import torch.distributed as dist

        world = dist.get_world_size(self.group)
        mine = torch.tensor([value], dtype=torch.int64, device=_device())
        parts = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(parts, mine, group=self.group)
        return [int(p.item()) for p in parts]

    def _gather_min(self, value: int) -> bool:
        import torch
        import torch.distributed as dist

        flag = torch.tensor([value], dtype=torch.uint8, device=_device())
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=self.group)
        return bool(flag.item())

    def _global(self, rank: int) -> int:
        import torch.distributed as dist

        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    def state(self) -> dict[str, Any]:
        """This rank's flag, overuse count and the restore keys of the batches it holds."""
        keys = [restore_key_of(batch) for batch in self.held]
        return {"out": self.out, "overuse": self.overuse, "held": keys}

    def restore(self, state: dict[str, Any] | None) -> None:
        """Take ``state`` (None: the start); the batches it held are read again now, before
        anything else runs the task encoder's hooks."""
        state = state or {}
        self.out, self.overuse = bool(state.get("out", False)), int(state.get("overuse", 0))
        loader = self._loader()
        keys = list(state.get("held", ()))
        self.held = [loader.restore_sample(key) for key in keys] if loader is not None else []
        self._overuse, self._any_out = None, False


def _device() -> str:
    import torch.distributed as dist

    return "cuda" if dist.get_backend() == "nccl" else "cpu"


__all__ = ["OUT", "ROUNDS", "Rounds", "oversample", "share"]
