"""Energon's logical-worker striding (its pull request #236): physical workers sharing a stream.

With ``WorkerConfig(logical_workers=L)`` below the ``P`` physical workers (ranks x dataloader
workers, ``P = fanout x L``), the plan has ``L`` streams and each is shared by ``fanout`` physical
workers: physical worker ``p = rank * workers + worker`` serves logical stream ``p // fanout``
and hands out its batches ``p % fanout``, ``p % fanout + fanout``, ... Every sharer runs the
whole stream (the same plan, the same hooks in the same order), so together they hand out each
batch of the stream exactly once, and the batches do not depend on the fanout.

For a batch it does not hand out, a worker sets ``BatchSlots.skipping``: ``batch`` and
``encode_batch`` are not called where both are ``skip_safe``, and then neither are
``pack_selected_samples`` and ``postencode_sample`` where they are too (Energon's rule). The
samples are still read, cooked and encoded (``preencode_sample``, ``select_samples_to_pack``
see every sample, on every sharer); Energon can also leave those out, stoker does not.

The loader sees ``P`` streams (*slots*), one per physical worker (:meth:`Strides.slot`), so
its positions, states and batch order need nothing new; a slot's position is its logical
stream's position after the slot's last batch. A state saved while striding therefore
restores on the same ranks and workers only (the slots are part of the state's topology).

Example:
    >>> strides = Strides(logical=2, world_size=6, num_workers=0)
    >>> [strides.slot(q) for q in range(3)]  # ranks 0, 1, 2 share logical stream 0
    [(0, 0), (0, 1), (0, 2)]
    >>> strides.kept(5, 0), strides.kept(5, 2)  # of 5 batches, offsets 0 and 2 hand out
    (2, 1)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from stoker.errors import ConfigError
from stoker.pipeline.hook_index import BatchSlots

T = TypeVar("T")


@dataclass(frozen=True)
class Strides:
    """Which logical stream and offset each loader slot (physical worker) has."""

    #: Logical streams (the plan's virtual workers).
    logical: int
    world_size: int
    num_workers: int

    @property
    def fanout(self) -> int:
        """Physical workers per logical stream."""
        return self.world_size * max(self.num_workers, 1) // self.logical

    @property
    def slots(self) -> int:
        """Loader streams: one per physical worker."""
        return self.logical * self.fanout

    def slot(self, slot: int) -> tuple[int, int]:
        """``(logical stream, offset)`` of loader stream ``slot``.

        The loader gives stream ``rank + worker * world_size`` to a rank's worker (see
        :class:`~stoker.plan.Topology`); #236 numbers physical workers
        ``rank * workers + worker``.
        """
        rank, worker = slot % self.world_size, slot // self.world_size
        physical = rank * max(self.num_workers, 1) + worker
        return physical // self.fanout, physical % self.fanout

    def kept(self, batches: int, offset: int) -> int:
        """Of a logical stream's ``batches``, how many the sharer at ``offset`` hands out."""
        return max(0, -(-(batches - offset) // self.fanout))


def strided(
    batches: Iterator[T], slots: BatchSlots, offset: int, fanout: int, resumed: bool
) -> Iterator[T]:
    """The batches of a logical stream that the sharer at ``offset`` hands out.

    ``resumed``: the stream restarts right after one of this sharer's batches (a restored
    position), so ``fanout - 1`` batches come before its next one; else ``offset``. The batches
    in between are made with ``slots.skipping`` set, and the hook indices (``slots.made``)
    count only the batches handed out.
    """
    made, lead = 0, fanout - 1 if resumed else offset
    end: Any = object()
    while True:
        slots.skipping = True
        try:
            for _ in range(lead):
                slots.made = made
                if next(batches, end) is end:
                    return
        finally:
            slots.skipping = False
        slots.made = made
        item = next(batches, end)
        if item is end:
            return
        yield item
        made += 1
        lead = fanout - 1


def refuse_shared_streams(dataset: Any, owner: str) -> None:
    """A clear error where ``dataset``'s streams are shared by several workers: ``owner``
    combines its datasets' batches per stream, which striding would break."""
    fanout = getattr(dataset, "fanout", 1)
    if fanout != 1:
        raise ConfigError(
            f"{owner} combines the batches of datasets whose streams {fanout} workers share "
            "(WorkerConfig(logical_workers=...) below the physical workers).",
            hint="Use logical_workers of at least world_size x num_workers for its datasets.",
        )


__all__ = ["Strides", "refuse_shared_streams", "strided"]
