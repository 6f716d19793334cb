"""The batch and sample indices a task encoder hook sees (Energon's ``current_batch_index`` /
``current_sample_index``), set by the pipeline right before it calls a hook.

A rank yields its batches in a canonical order: batch ``t`` comes from the rank's stream
``t mod L`` (``L`` streams). So the ``k``-th batch of the stream at place ``i`` is the rank's
batch ``t``, and :class:`BatchSlots` computes it without asking the main process. Sample indices
count a stream's ``encode_sample`` calls the same way (``calls * L + i``): unique on the rank,
restored with the stream's position.

Example:
    >>> slots = BatchSlots(first=1, step=2)  # second of two streams, from the start
    >>> slots.batch_index(), slots.sample_index(3)
    (1, 7)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import TracebackType

from stoker.errors import StokerError
from stoker.pipeline.stage_clock import CLOCK


class _Active(threading.local):
    """The (batch index, sample index) of the hooks running now, innermost last, per thread
    (thread workers run hooks side by side in one process)."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, int]] = []


_LOCAL = _Active()


def active() -> list[tuple[int, int]]:
    """This thread's stack of hook indices (:func:`push` and :func:`pop` change it; a
    per-sample path may append and pop it directly)."""
    return _LOCAL.stack


@dataclass
class BatchSlots:
    """Where one stream's batches fall in its rank's batch sequence."""

    #: The rank's batch index of the stream's next batch when the stream (re)started.
    first: int = 0
    #: The number of streams of the rank (the stride between one stream's batches).
    step: int = 1
    #: Batches the stream yielded since it (re)started.
    made: int = 0
    #: The batch built now is not this worker's: another physical worker sharing the logical
    #: stream hands it out (Energon's logical workers, :mod:`stoker.runtime.logical_stride`),
    #: so the hooks marked ``skip_safe`` are left out for it.
    skipping: bool = field(default=False, repr=False, compare=False)

    def batch_index(self) -> int:
        """The rank's batch index of the batch this stream builds now."""
        return self.first + self.made * self.step

    def sample_index(self, calls: int) -> int:
        """The rank-unique index of the stream's ``encode_sample`` call number ``calls``."""
        return calls * self.step + self.first % self.step


def batch_slots(rank_streams: list[int], stream: int, t: int) -> BatchSlots:
    """The slots of ``stream`` among ``rank_streams`` when the rank's next batch is ``t``.

    Example:
        >>> batch_slots([4, 5, 6], stream=4, t=5)
        BatchSlots(first=6, step=3, made=0)
    """
    step = len(rank_streams)
    place = rank_streams.index(stream)
    return BatchSlots(first=t + (place - t) % step, step=step)


def push(batch_index: int, sample_index: int) -> None:
    """Make ``(batch_index, sample_index)`` current for the hooks called until :func:`pop`."""
    _LOCAL.stack.append((batch_index, sample_index))


def pop() -> None:
    """Undo the last :func:`push`."""
    _LOCAL.stack.pop()


class HookCall:
    """``with HookCall(index, stage):`` around a hook call of a batch-level stage: the hook
    sees ``index`` as its batch and sample index, and the stage's clock
    (:mod:`stoker.pipeline.stage_clock`) runs until the block ends, however it ends.

    Example:
        >>> from stoker.pipeline.stage_clock import PACK
        >>> with HookCall(7, PACK):
        ...     current()
        (7, 7)
    """

    __slots__ = ("index", "stage")

    def __init__(self, index: int, stage: int) -> None:
        self.index, self.stage = index, stage

    def __enter__(self) -> None:
        _LOCAL.stack.append((self.index, self.index))
        CLOCK.start(self.stage)

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        CLOCK.stop()
        _LOCAL.stack.pop()


def current() -> tuple[int, int]:
    """(batch index, sample index) of the hook running now.

    Raises:
        StokerError: outside a hook called by a stoker loader.
    """
    stack = _LOCAL.stack
    if not stack:
        raise StokerError(
            "current_batch_index / current_sample_index are only set while a loader calls a "
            "task encoder hook.",
            hint="Read them inside encode_sample, batch, encode_batch (or the other hooks) of a "
            "task encoder iterated by stoker.get_loader / get_savable_loader.",
        )
    return stack[-1]


__all__ = ["BatchSlots", "HookCall", "active", "batch_slots", "current", "pop", "push"]
