"""Planning read-ahead requests: samples (shard, byte range) in read order -> coalesced requests.

Pure functions of byte ranges; :mod:`stoker.pipeline.read_ahead` fetches what they plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

#: Ranges of one shard closer than this are fetched in one request. The bytes between are read
#: too, and samples announced later that lie in them are taken from that request. (A request
#: costs milliseconds of client CPU and a round trip: about as much as a MiB of transfer.)
REMOTE_GAP = 1 << 20
#: The largest request made by merging ranges (one sample larger than this is one request).
MAX_REQUEST = 8 << 20
#: The largest first request when nothing is buffered yet (the first samples are awaited).
FIRST_REQUEST = 1 << 20

SampleKey = tuple[str, int, int]


@dataclass(eq=False)
class Request:
    """One ranged read ``[start, end)`` of shard ``name`` covering ``samples``."""

    name: str
    start: int
    end: int
    #: Position (in the order given) of the first sample that needs it.
    first: int
    samples: list[tuple[int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.end - self.start


def plan_requests(samples: Sequence[SampleKey], *, gap: int, cap: int) -> list[Request]:
    """Coalesced requests for ``samples`` (shard, start, end) in read order, by first need.

    Ranges of one shard are merged when the hole between them is at most ``gap`` bytes and the
    merged request stays within ``cap`` bytes. A sample listed twice is in one request twice.
    """
    by_name: dict[str, list[tuple[int, int, int]]] = {}
    for position, (name, start, end) in enumerate(samples):
        by_name.setdefault(name, []).append((start, end, position))
    requests: list[Request] = []
    for name, items in by_name.items():
        items.sort()
        current: Request | None = None
        for start, end, position in items:
            if (
                current is not None
                and start - current.end <= gap
                and max(end, current.end) - current.start <= cap
            ):
                current.end = max(current.end, end)
                current.first = min(current.first, position)
            else:
                current = Request(name, start, end, position)
                requests.append(current)
            current.samples.append((start, end))
    requests.sort(key=lambda r: r.first)
    return requests


def split_head(request: Request, limit: int) -> list[Request]:
    """``request`` as a head of at most ``limit`` bytes (one sample at least) and the rest."""
    fits = [end for _, end in request.samples if end - request.start <= limit]
    cut = max(fits) if fits else request.samples[0][1]
    head = [sample for sample in request.samples if sample[1] <= cut]
    rest = [sample for sample in request.samples if sample[1] > cut]
    if not rest:
        return [request]
    first = Request(request.name, request.start, cut, request.first, head)
    other = Request(request.name, min(s for s, _ in rest), request.end, request.first, rest)
    return [first, other]
