"""The base of wrappers that hold items across outputs (shuffle buffer, grouping, packing,
iterator maps) over any inner dataset: exact restore by replaying from an anchor.

Such a wrapper's state depends on the items it holds. Over an arbitrary inner dataset they have
no cheaper reference than the inner position they were read at, so the wrapper saves an
*anchor*: the inner mark after which it held nothing, and the outputs it made since. A restore
opens the inner stream at the anchor and runs the wrapper again, dropping the outputs already
used. The anchor moves forward whenever the wrapper's buffers are empty (a group batcher between
groups, the end of a pass); a shuffle buffer is never empty mid-pass, so its restore replays the
pass so far. For training, prefer what ``get_train_dataset`` plans without replay
(``shuffle_buffer_size``, ``packing_buffer_size``, ``group_batches``).

A stream position is ``[*inner mark, *anchor position, outputs since anchor, outputs in pass]``;
the anchor's inner buffers are the wrapper's own saved data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.pipeline.stream import Position
from stoker.streams import StreamBatches
from stoker.wrappers.base import Mark, Out, StreamContext, Wrapper

#: An item of the inner stream with the inner mark after it.
Marked = tuple[Any, Mark]
#: What a replayed process yields: output, inner mark after it, whether it holds nothing now.
Step = tuple[Any, Mark, bool]


class ReplayWrapper(Wrapper):
    """A wrapper whose :meth:`process` holds items; restores replay it from the anchor."""

    def own_size(self) -> int:
        return self.dataset.position_size() + 2

    def initial_own(self, start: Mark) -> list[int]:
        return [*start[0].to_list(), 0, 0]

    def resume_mark(self, own: list[int], held: Any, inner: Mark) -> Mark:
        return Position.from_list(own[:-2]), held

    def process(self, ctx: StreamContext, items: Iterator[Marked], first: int) -> Iterator[Step]:
        """The outputs from ``items`` (read from the anchor on); ``first`` is the index in the
        pass of the first output (for keyed random choices)."""
        raise NotImplementedError

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        anchor: Mark = (Position.from_list(ctx.own[:-2]), ctx.held)
        done, since = ctx.own[-1], ctx.own[-2]
        total = done - since  # outputs of the pass before the anchor
        marked = ((item, (position, held)) for item, position, held in items)
        for output, mark, empty in self.process(ctx, marked, total):
            total += 1
            since += 1
            if empty:
                anchor, since = mark, 0
            if total > done:
                yield output, mark, [*anchor[0].to_list(), since, total], anchor[1]
