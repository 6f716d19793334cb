"""Pickled batches of plain data cross from a worker in a ring of shared memory, not the pipe.

A batch of small samples pickles to tens or hundreds of kilobytes. Sent through the worker's
pipe, it is copied into the message, written in pieces of the pipe's 64 kB (each a wake-up of
the other side), read and copied again; and it must travel alone, because a message larger than
the pipe's buffer costs more than it saves (:mod:`stoker.runtime.bundle`). Instead, a worker
copies the pickle once into its :class:`PayloadRing`, a shared-memory segment it reuses, and
sends only where it lies: messages stay small, so many batches travel in one bundle. The main
process unpickles straight from its mapping of the ring (:class:`RingReader`), and tells the
worker how far it has read by writing that count into the ring's header: no message goes back.

The worker is the only writer of the data and the main process of the header. The main process
reads a worker's ring batches in the order they were written (they are handed out in the
worker's order), so the ring is a plain FIFO: the worker writes a payload where the previous
one ended (or at the start, when it would not fit before the end), and only over bytes the main
process has read. A payload that does not fit (the main process is behind, or the payload is
larger than :data:`MAX_SHARE` of the ring) is sent in the message as before.

The ring is a torch shared-memory storage, made at the worker's first ring payload (sized from
it, :func:`ring_capacity`) and sent once, with that payload's message.

Example:
    >>> ring = PayloadRing()
    >>> first = ring.put(b"hello" * 100)  # in the worker
    >>> reader = RingReader(first.storage)  # in the main process, from the first message
    >>> bytes(reader.view(first.span))[:10], first.span
    (b'hellohello', (0, 500, 500))
    >>> reader.done(first.span)  # the worker may write over it now
    >>> ring.put(b"world" * 100).storage is None  # the storage was sent once
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Bytes before the data: the count of bytes the main process has read (uint64), padded.
HEADER = 64
#: Smallest and largest ring (bytes); between them, :data:`PAYLOADS` times the first payload.
MIN_BYTES, MAX_BYTES = 4 << 20, 16 << 20
#: The ring holds this many payloads of the first one's size (batches in flight and waiting).
PAYLOADS = 32
#: A payload larger than this share of the ring travels in its message.
MAX_SHARE = 1 / 8
#: Smaller payloads travel in their message (a ring span is not worth it).
MIN_PAYLOAD = 256


def ring_capacity(payload: int) -> int:
    """Data bytes of a ring whose first payload has ``payload`` bytes (whole pages).

    Example:
        >>> ring_capacity(3000) >> 20, ring_capacity(200_000) >> 20
        (4, 6)
    """
    wanted = min(max(PAYLOADS * payload, MIN_BYTES), MAX_BYTES)
    return -(-wanted // 4096) * 4096


@dataclass(frozen=True, slots=True)
class Placed:
    """Where :meth:`PayloadRing.put` wrote a payload."""

    #: (start in the data, length, bytes written up to its end): what the main process reads.
    span: tuple[int, int, int]
    #: The ring's storage with its first payload (sent once), else None.
    storage: torch.UntypedStorage | None


def _views(storage: torch.UntypedStorage) -> tuple[memoryview, memoryview]:
    """(the header's uint64 counter, the data bytes) over ``storage`` (memoryviews: cheaper
    to index and copy into than arrays)."""
    array = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
    whole = memoryview(array.data)
    return whole[:8].cast("Q"), whole[HEADER:]


class PayloadRing:
    """A worker's ring (see the module docs); :meth:`put` writes a payload into it."""

    def __init__(self) -> None:
        self.storage: torch.UntypedStorage | None = None
        self._written = 0  # bytes written (and skipped at the end) since the start
        self._sent = False

    @property
    def capacity(self) -> int:
        """Data bytes of the ring (0 until its first payload made it)."""
        return 0 if self.storage is None else len(self._data)

    def put(self, payload: bytes | memoryview) -> Placed | None:
        """Copy ``payload`` (bytes) into the ring; None where it does not fit (send it in the
        message)."""
        size = len(payload)
        if size < MIN_PAYLOAD:
            return None
        if self.storage is None:
            self.storage = _new_shared(HEADER + ring_capacity(size))
            self._read, self._data = _views(self.storage)
        data = self._data
        capacity = len(data)
        if size > capacity * MAX_SHARE:
            return None
        start = self._written % capacity
        skip = capacity - start if start + size > capacity else 0
        if self._written + skip + size - self._read[0] > capacity:
            return None  # the main process has not read far enough yet
        start = 0 if skip else start
        data[start : start + size] = payload
        self._written += skip + size
        storage = None if self._sent else self.storage
        self._sent = True
        return Placed((start, size, self._written), storage)


class RingReader:
    """The main process's view of one worker's ring."""

    def __init__(self, storage: torch.UntypedStorage) -> None:
        self.storage = storage  # keeps the mapping
        self._read, self._data = _views(storage)

    def view(self, span: tuple[int, int, int]) -> memoryview:
        """The payload at ``span`` (valid until :meth:`done`)."""
        start, size, _ = span
        return self._data[start : start + size]

    def done(self, span: tuple[int, int, int]) -> None:
        """The payload at ``span`` is read: the worker may write over it (and all before it)."""
        end = span[2]
        if end > self._read[0]:
            self._read[0] = end


def _new_shared(nbytes: int) -> torch.UntypedStorage:
    return torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call,no-any-return]


__all__ = ["PayloadRing", "Placed", "RingReader", "ring_capacity"]
