"""Small batches leave a worker in bundles: several items in one message.

Every message from a dataloader worker costs both processes a fixed amount of CPU, whatever its
size: torch's index and result queues, their feeder threads, pickling the message, waking the
other process, torch's per-item bookkeeping (a few hundred microseconds on a shared 2-core
machine). A batch of small text samples is made in about as long, so workers that send each
batch alone barely add throughput. A worker therefore gathers the items it makes in quick
succession into one :class:`Bundle`, sent when it is due (:class:`Bundler`):

* the worker's first item goes alone (the first batch is not delayed);
* a bundle is due once it holds :data:`MAX_ITEMS` items or :data:`MAX_BYTES` of payload, or its
  items took :data:`MAX_SECONDS` to make (counted from when the worker went on making items
  after its previous message, see :meth:`Bundler.resumed`): a batch waits at most that long for
  its companions, and a batch that alone takes longer is sent alone;
* the bytes counted are those in the message: a batch whose pickle lies in the worker's payload
  ring (:mod:`stoker.pipeline.payload_ring`) adds none, so batches of small samples travel many
  to a message however large their pickles; a bundle's ring bytes are limited apart
  (``max_ring_bytes``, :data:`RING_SHARE` of the ring): the bundles in flight must fit the ring
  together, or later pickles would go through the pipe;
* an item whose batch refers to shared-memory slots closes its bundle: the slots are reused as
  soon as the main process lets go of them, so such batches are not held back;
* an error closes its bundle too (the worker ends after it).

The order of items is kept, so the main process sees the same items in the same order as
without bundles; only when they arrive changes.

Example:
    >>> bundler = Bundler(max_items=3, max_bytes=100, max_seconds=60.0)
    >>> bundler.add("first", 10), bundler.add("a", 10), bundler.add("b", 10)
    ([Bundle(['first'])], [], [])
    >>> bundler.add("large", 100)  # too large to join a and b
    [Bundle(['a', 'b']), Bundle(['large'])]
    >>> bundler.add("c", 10), bundler.take()
    ([], Bundle(['c']))
"""

from __future__ import annotations

from time import perf_counter
from typing import Generic, TypeVar

T = TypeVar("T")

#: Longest a bundle collects items (seconds, since it was started). Longer bundles cost fewer
#: messages (each ~0.3 ms of the main process's CPU on a shared 2-core machine) but let the
#: workers run further ahead of the training loop: up to ``prefetch_factor`` bundles wait per
#: worker. Measured at W=2 with an idle consumer, 50 ms bundles saved a fifth of the main
#: process's CPU and yet left 10-13 % of what the workers made in a 60 000-sample run unread
#: at its end (3-4 % at 20 ms; 8-17 % of a 20 000-sample run): work paid for and never seen.
MAX_SECONDS = 0.02
#: Most payload bytes in one bundle: a message that fits a pipe's buffer (64 kB on Linux) is
#: written and read in one go; a larger one passes in pieces, each a wake-up of the other side
#: (several times the CPU per byte on a busy machine). A batch larger than this goes alone.
MAX_BYTES = 48 << 10
#: Most items in one bundle.
MAX_ITEMS = 128
#: Share of a worker's payload ring one bundle's pickles may fill: the main process holds up to
#: ``prefetch_factor`` (2) bundles while the worker fills the next, and all must fit the ring.
RING_SHARE = 1 / 4


class Bundle(Generic[T]):
    """Items of one worker sent as one message, in the order they were made (not a sequence:
    torch's ``default_convert`` passes it on as it is)."""

    __slots__ = ("items",)

    def __init__(self, items: list[T]) -> None:
        self.items = items

    def __reduce__(self) -> tuple[type[Bundle[T]], tuple[list[T]]]:
        return Bundle, (self.items,)

    def __repr__(self) -> str:
        return f"Bundle({self.items!r})"


class Bundler(Generic[T]):
    """Collects a worker's items into bundles (see the module docs)."""

    def __init__(
        self,
        *,
        max_seconds: float | None = None,
        max_bytes: int | None = None,
        max_items: int | None = None,
    ) -> None:
        """Limits of one bundle (None: :data:`MAX_SECONDS`, :data:`MAX_BYTES`,
        :data:`MAX_ITEMS`)."""
        self.max_seconds = MAX_SECONDS if max_seconds is None else max_seconds
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        self.max_items = MAX_ITEMS if max_items is None else max_items
        #: Most ring bytes in one bundle (see the module docs); None: no limit. The worker sets
        #: it once its ring exists (:data:`RING_SHARE` of the ring's capacity).
        self.max_ring_bytes: int | None = None
        self._items: list[T] = []
        self._bytes = 0
        self._ring_bytes = 0
        self._started = perf_counter()
        self._first = True

    def resumed(self) -> None:
        """The worker makes items again (after sending a bundle and being asked for the next):
        the next bundle's clock starts now, not while the worker waited."""
        self._started = perf_counter()

    def add(
        self, item: T, nbytes: int, *, close: bool = False, ring_bytes: int = 0
    ) -> list[Bundle[T]]:
        """Add ``item`` (``nbytes`` of payload in the message, ``ring_bytes`` in the payload
        ring); the bundles due now, in order (none, or the open one, or the open one and then
        ``item`` alone when both together would be too large). ``close``: send the bundle with
        this item."""
        due: list[Bundle[T]] = []
        if self._items and self._bytes + nbytes > self.max_bytes:
            due.append(self._take())
        self._items.append(item)
        self._bytes += nbytes
        self._ring_bytes += ring_bytes
        max_ring = self.max_ring_bytes
        if (
            close
            or self._first
            or len(self._items) >= self.max_items
            or self._bytes >= self.max_bytes
            or (max_ring is not None and self._ring_bytes >= max_ring)
            or perf_counter() - self._started >= self.max_seconds
        ):
            self._first = False
            due.append(self._take())
        return due

    def take(self) -> Bundle[T] | None:
        """The open bundle (None if empty); a new one starts."""
        return self._take() if self._items else None

    def _take(self) -> Bundle[T]:
        items, self._items, self._bytes, self._ring_bytes = self._items, [], 0, 0
        self._started = perf_counter()
        return Bundle(items)


__all__ = ["Bundle", "Bundler"]
