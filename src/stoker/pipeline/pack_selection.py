"""How one ``select_samples_to_pack`` result changes the packing buffer.

The task encoder returns groups of the very sample objects it was given, and with a
:class:`~stoker.pipeline.pack_output.PackedSamplesOutput` the samples to push back.
:func:`apply_selection` finds each in the buffer by identity (a place at most once, so equal
samples are never confused); a :class:`~stoker.pipeline.pack_partial.PartialSample` made from a
buffered sample stands for it (with its reference) and consumes it. Without a push-back list the
samples no group took stay in the buffer; with one, the buffer becomes the pushed-back samples
and the others are dropped (the packer logs and counts them).

Example:
    >>> a, b, c = ["a"], ["b"], ["c"]
    >>> buffer = [(a, (0, 0, 0, 0)), (b, (0, 0, 1, 0)), (c, (0, 0, 2, 0))]
    >>> chosen = apply_selection(buffer, [[c, a]], None)
    >>> chosen.groups, chosen.buffer, chosen.taken
    ([[(['c'], (0, 0, 2, 0)), (['a'], (0, 0, 0, 0))]], [(['b'], (0, 0, 1, 0))], 2)
    >>> apply_selection(buffer, [[a]], [c]).dropped
    [(['b'], (0, 0, 1, 0))]
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

from stoker.errors import StokerError
from stoker.pipeline.pack_partial import PartialSample, base_of
from stoker.pipeline.refs import Ref

Entry = tuple[Any, Ref]  # (sample, member reference)


@dataclass
class Selection:
    """What a selection made of the buffer."""

    #: The groups to pack, in order (empty ones left out).
    groups: list[list[Entry]]
    #: What the buffer becomes.
    buffer: list[Entry]
    #: Buffered samples neither packed nor pushed back (only with a push-back list).
    dropped: list[Entry]
    #: Samples the groups took.
    taken: int
    #: Samples pushed back.
    pushed_back: int


def apply_selection(
    buffer: list[Entry], groups: list[Any], pushback: list[Any] | None
) -> Selection:
    """The groups of buffered samples ``groups`` and the buffer after them (see module)."""
    samples = [sample for sample, _ in buffer]
    places: dict[int, list[int]] = collections.defaultdict(list)
    bases: dict[int, Ref] = {}
    for i, sample in enumerate(samples):
        places[id(sample)].append(i)
        bases[id(base_of(sample))] = buffer[i][1]
    split: set[int] = set()  # the bases of new partial samples

    def entry(sample: Any, how: str) -> Entry:
        derived = isinstance(sample, PartialSample) and not places.get(id(sample))
        if derived and id(sample.sample) in bases:
            split.add(id(sample.sample))
            return sample, bases[id(sample.sample)]
        return buffer[_take_place(places, sample, how)]

    picked = [[entry(sample, "packed") for sample in group] for group in groups]
    kept = [entry(sample, "pushed back") for sample in pushback or ()]
    left = {i for free in places.values() for i in free}  # places nothing took
    consumed = {i for i in left if id(base_of(samples[i])) in split}
    rest = [buffer[i] for i in sorted(left - consumed)]
    taken = sum(len(group) for group in picked)
    groups_out = [group for group in picked if group]
    if pushback is None:
        return Selection(groups_out, rest, [], taken, 0)
    return Selection(groups_out, kept, rest, taken, len(kept))


def _take_place(places: dict[int, list[int]], sample: Any, how: str) -> int:
    """The next buffer place of ``sample`` (its id), refusing one not there or taken."""
    free = places.get(id(sample))
    if not free:
        raise StokerError(
            f"select_samples_to_pack {how} a sample that is not in the buffer (or one twice: "
            f"packed or pushed back twice, or both).",
            hint="Return the very sample objects it was given (not copies), each at most once.",
        )
    return free.pop(0)
