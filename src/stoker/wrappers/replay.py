"""The base of wrappers whose state is an arbitrary function of the items so far (an iterator
map): exact restore by replaying from an anchor.

An ``iter_map_fn`` may hold any items in any way, so the only reference to its state is the
inner position it started from. The wrapper saves an *anchor* (the inner mark where the
function started, or where it last said it holds nothing) and the outputs it made since; a
restore opens the inner stream at the anchor, runs the function again and drops the outputs
already used. Its cost grows with the outputs since the anchor (the pass so far). Wrappers
that say which items they hold re-read only from the oldest of those instead
(:mod:`stoker.wrappers.holding`).

A stream position is ``[*inner mark, *anchor position, outputs since anchor, outputs in pass]``;
the anchor's inner buffers are the wrapper's own saved data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.pipeline.refs import Position
from stoker.runtime.streams import StreamBatches
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
