"""The base of wrappers that hold items across outputs (shuffle buffer, grouping, packing) over
any inner dataset: a restore re-reads the inner stream from the oldest item held.

Items are numbered by how many the stream had read before them in this pass. After each output
the wrapper says which numbers it holds, in its own structure (plain data), and the base keeps
the inner mark before the oldest of them: the *anchor*. A stream position is
``[*inner mark, *anchor position, anchor number, items read, outputs in pass]``; the wrapper's
saved data is ``{"anchor": the anchor's inner buffers, "held": its structure}``. A restore opens
the inner stream at the anchor, reads up to where it was, keeps the items held, and rebuilds the
wrapper's state from them. Its cost is the distance back to the oldest item held, not the time
since the start of the pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from stoker.errors import StokerError
from stoker.pipeline.refs import Position
from stoker.runtime.streams import StreamBatches
from stoker.wrappers.base import Mark, Out, StreamContext, Wrapper

#: An item of the inner stream with its number in the pass.
Numbered = tuple[int, Any]


class HoldingWrapper(Wrapper):
    """A wrapper whose :meth:`process` holds items (subclasses define the three hooks)."""

    def process(
        self, ctx: StreamContext, items: Iterator[Numbered], held: Any, first: int
    ) -> Iterator[tuple[Any, Any]]:
        """Outputs from ``items``, each with the numbers held after it (plain data).

        ``held`` is the restored structure with items in place of numbers (None: fresh);
        ``first`` is the index in the pass of the first output (for keyed random choices).
        """
        raise NotImplementedError

    def held_numbers(self, held: Any) -> Iterable[int]:
        """The item numbers in a saved structure."""
        raise NotImplementedError

    def with_items(self, held: Any, items: Mapping[int, Any]) -> Any:
        """The saved structure with each number replaced by ``(number, item)``."""
        raise NotImplementedError

    # --- the stream transform ------------------------------------------------------------------

    def own_size(self) -> int:
        return self.dataset.position_size() + 3

    def initial_own(self, start: Mark) -> list[int]:
        return [*start[0].to_list(), 0, 0, 0]

    def resume_mark(self, own: list[int], held: Any, inner: Mark) -> Mark:
        return Position.from_list(own[:-3]), (held or {}).get("anchor")

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        anchor_number, read, done = ctx.own[-3:]
        saved = (ctx.held or {}).get("held")
        reader = _Reader(items, ctx.start, anchor_number)
        restored = None
        if saved is not None:
            wanted = set(self.held_numbers(saved))
            found = {n: item for n, item in reader.skip_to(read) if n in wanted}
            restored = self.with_items(saved, found)
        total = done
        for output, held in self.process(ctx, reader.numbered(), restored, done):
            total += 1
            numbers = list(self.held_numbers(held))
            anchor = reader.anchor(min(numbers) if numbers else reader.read)
            own = [*anchor[0].to_list(), min(numbers, default=reader.read), reader.read, total]
            yield output, reader.mark, own, {"anchor": anchor[1], "held": held}


class _Reader:
    """Numbers an inner stream's items and remembers the mark before each item still held."""

    def __init__(self, items: StreamBatches, start: Mark, first: int) -> None:
        self.items = iter(items)
        self.mark = start  # the inner mark after the last item read
        self.read = first  # items read in this pass
        #: The marks before items ``self.base``, ``self.base + 1``, ... (the window).
        self.before: deque[Mark] = deque()
        self.base = first

    def _next(self) -> Numbered | None:
        try:
            item, position, held = next(self.items)
        except StopIteration:
            return None
        number = self.read
        self.before.append(self.mark)
        self.mark, self.read = (position, held), number + 1
        return number, item

    def skip_to(self, read: int) -> Iterator[Numbered]:
        """The items up to number ``read`` (already read before a restore)."""
        while self.read < read:
            got = self._next()
            if got is None:
                return
            yield got

    def numbered(self) -> Iterator[Numbered]:
        while (got := self._next()) is not None:
            yield got

    def anchor(self, oldest: int) -> Mark:
        """The mark before item ``oldest`` (the current one if it is not read yet); forgets
        the marks before it."""
        while self.before and self.base < oldest:
            self.before.popleft()
            self.base += 1
        return self.before[0] if self.before else self.mark


def pick(items: Mapping[int, Any], number: int) -> Numbered:
    """``(number, item)`` of a restored item, or a clear error if the stream no longer has it."""
    if number not in items:
        raise StokerError(
            f"restoring a wrapper's buffer: item #{number} of the stream is gone.",
            hint="Restore with the same data and inner dataset as when the state was saved.",
        )
    return number, items[number]
