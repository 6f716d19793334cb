"""Planning read-ahead requests: samples (shard, byte range) in read order -> coalesced requests.

Pure functions of byte ranges; :mod:`stoker.pipeline.read_ahead` fetches what they plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

#: Ranges of one shard closer than this are fetched in one request. The bytes between are read
#: too, and samples announced later that lie in them are taken from that request. (A request
#: costs milliseconds of client CPU and a round trip: about as much as a MiB of transfer.)
REMOTE_GAP = 1 << 20
#: The largest request made by merging ranges (one sample larger than this is one request).
MAX_REQUEST = 8 << 20
#: The largest first request when nothing is buffered yet (the first samples are awaited).
FIRST_REQUEST = 1 << 20

SampleKey = tuple[str, int, int]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class ShardSamples:
    """Samples of one shard announced together: their byte ranges ``[starts, ends)`` and their
    places in the read order (any increasing numbering of the whole announcement)."""

    name: str
    places: Ints
    starts: Ints
    ends: Ints


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
    return plan_shards(by_shard(samples), gap=gap, cap=cap)


def by_shard(samples: Iterable[SampleKey]) -> list[ShardSamples]:
    """``samples`` (shard, start, end) grouped by shard, placed by their position."""
    by_name: dict[str, tuple[list[int], list[int], list[int]]] = {}
    for position, (name, start, end) in enumerate(samples):
        places, starts, ends = by_name.setdefault(name, ([], [], []))
        places.append(position)
        starts.append(start)
        ends.append(end)
    return [
        ShardSamples(name, *(np.array(column, dtype=np.int64) for column in columns))
        for name, columns in by_name.items()
    ]


def plan_shards(shards: Sequence[ShardSamples], *, gap: int, cap: int) -> list[Request]:
    """:func:`plan_requests` of samples given by shard as arrays: a loop per request, not per
    sample. A request's :attr:`~Request.first` is its first sample's rank in the read order of
    all ``shards``' samples."""
    places = np.concatenate([shard.places for shard in shards]) if shards else np.empty(0, int)
    ranks = np.empty(len(places), dtype=np.int64)
    ranks[np.argsort(places, kind="stable")] = np.arange(len(places))
    requests: list[Request] = []
    done = 0
    for shard in shards:
        count = len(shard.places)
        order = np.lexsort((shard.places, shard.ends, shard.starts))
        starts, ends = shard.starts[order], shard.ends[order]
        firsts = ranks[done : done + count][order]
        done += count
        requests += _merged(shard.name, starts, ends, firsts, gap, cap)
    requests.sort(key=lambda r: r.first)
    return requests


def _merged(name: str, starts: Ints, ends: Ints, firsts: Ints, gap: int, cap: int) -> list[Request]:
    """The requests of one shard's samples sorted by start: each takes the samples after its
    first while the hole before the next is at most ``gap`` and the whole stays within ``cap``."""
    out: list[Request] = []
    count, i = len(starts), 0
    while i < count:
        head = int(starts[i])
        # Only samples starting within ``cap`` of the head can join it.
        window = int(np.searchsorted(starts, head + cap, side="right"))
        reach = np.maximum.accumulate(ends[i:window])  # the request's end after each sample
        joins = (starts[i + 1 : window] - reach[:-1] <= gap) & (reach[1:] - head <= cap)
        stops = np.flatnonzero(~joins)
        j = i + 1 + (int(stops[0]) if len(stops) else window - i - 1)
        spans = list(zip(starts[i:j].tolist(), ends[i:j].tolist(), strict=True))
        out.append(Request(name, head, int(reach[j - i - 1]), int(firsts[i:j].min()), spans))
        i = j
    return out


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
