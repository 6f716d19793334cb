"""A token-budget packer for ``select_samples_to_pack``: full packs, split samples where needed.

:class:`TokenBudgetPacker` packs a buffer of samples into packs of at most ``capacity`` tokens.
Each round it bins whole samples longest first (:func:`~stoker.pipeline.bins.first_fit_decreasing`)
and takes the bins at least ``min_fill`` full; then it fills one more pack to the brim, adding the
longest samples left and splitting the one that does not fit: its head (a
:class:`~stoker.pipeline.pack_partial.PartialSample` with ``slice=(start, stop)``) closes the pack
and its tail is pushed back, first in line. Everything else is pushed back for the next round
(a :class:`~stoker.pipeline.pack_output.PackedSamplesOutput`). Samples longer than ``capacity``
are split the same way. A buffer smaller than ``buffer_size`` is the stream's last: it is packed
in order, split at every pack's end, so only the very last pack is not full.

The user gives ``size(sample) -> int`` (tokens of a whole sample) and, optionally,
``split(sample, start, stop) -> int``: where to cut a sample whose tokens ``[start, ...)`` would
fill the pack at ``stop`` (return a cut in ``(start, stop]``, e.g. the last turn boundary; the
default cuts at ``stop``). The slices are applied by the task encoder
(``postencode_sample`` or ``pack_selected_samples``): :func:`token_window` gives
``(whole sample, start, stop)`` for full and partial samples alike. ``benchmarks/bench_packing.py``
measures its cost per sample and its fill ratio against plain first-fit-decreasing.

Example:
    >>> packer = TokenBudgetPacker(capacity=8, size=len, buffer_size=3)
    >>> out = packer.select([[0] * 5, [0] * 6, [0] * 2])
    >>> [[token_window(s, len)[1:] for s in pack] for pack in out.packs]
    [[(0, 6), (0, 2)]]
    >>> [token_window(s, len)[1:] for s in out.pushback]
    [(0, 5)]
    >>> out = packer.select([[0] * 5, [0] * 5, [0] * 5])
    >>> [[token_window(s, len)[1:] for s in pack] for pack in out.packs]
    [[(0, 5), (0, 3)]]
    >>> [token_window(s, len)[1:] for s in out.pushback]
    [(3, 5), (0, 5)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stoker.errors import ConfigError, StokerError
from stoker.pipeline.bins import first_fit_decreasing
from stoker.pipeline.pack_output import PackedSamplesOutput
from stoker.pipeline.pack_partial import PartialSample

#: ``split(sample, start, stop) -> cut``: where to end the head of a sample (see the module).
Split = Callable[[Any, int, int], int]


def token_window(sample: Any, size: Callable[[Any], int]) -> tuple[Any, int, int]:
    """``(whole sample, start, stop)``: a partial sample's token range, or a whole one's."""
    if isinstance(sample, PartialSample):
        start, stop = sample.slice
        return sample.sample, int(start), int(stop)
    return sample, 0, int(size(sample))


@dataclass(frozen=True)
class TokenBudgetPacker:
    """Packs of at most ``capacity`` tokens, split samples filling them (see the module).

    Call it (or :meth:`select`) from ``select_samples_to_pack``; its :meth:`sample_size` and
    ``capacity`` serve as the task encoder's ``packing_sample_size`` / ``packing_capacity``,
    which give ``loader.stats().packing["fill_ratio"]``.
    """

    capacity: int
    size: Callable[[Any], int]
    #: The loader's ``packing_buffer_size``: a smaller buffer is the stream's last.
    buffer_size: int | None = None
    #: Bins of whole samples at least this full are packs as they are.
    min_fill: float = 0.995
    split: Split | None = None

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ConfigError(f"TokenBudgetPacker: capacity={self.capacity} must be >= 1.")
        if not 0.0 <= self.min_fill <= 1.0:
            raise ConfigError(f"TokenBudgetPacker: min_fill={self.min_fill} must be in [0, 1].")

    def __call__(self, samples: Sequence[Any]) -> PackedSamplesOutput[Any]:
        return self.select(samples)

    def sample_size(self, sample: Any) -> int:
        """Tokens of a whole or partial sample."""
        _, start, stop = token_window(sample, self.size)
        return stop - start

    def select(self, samples: Sequence[Any]) -> PackedSamplesOutput[Any]:
        """The packs of one selection round and the samples pushed back (see the module)."""
        lengths = [self.sample_size(s) for s in samples]
        if self.buffer_size is not None and len(samples) < self.buffer_size:
            return self._in_order(samples)
        bins = first_fit_decreasing(lengths, self.capacity)
        full = [b for b in bins if sum(lengths[i] for i in b) >= self.min_fill * self.capacity]
        packs: list[list[Any]] = [[samples[i] for i in b] for b in full]
        taken = {i for b in full for i in b}
        rest = sorted((i for i in range(len(samples)) if i not in taken), key=lambda i: -lengths[i])
        top, tail, used = self._top_up(samples, rest, lengths)
        if top:
            packs.append(top)
        kept = [samples[i] for i in range(len(samples)) if i not in taken and i not in used]
        return PackedSamplesOutput(packs=packs, pushback=[*tail, *kept])

    def _top_up(
        self, samples: Sequence[Any], order: list[int], lengths: list[int]
    ) -> tuple[list[Any], list[Any], set[int]]:
        """One pack filled from ``order`` (longest first), the last member split to fit: the
        pack, the tail to push back, the indices used. Nothing if they cannot fill it."""
        if sum(lengths[i] for i in order) < self.capacity:
            return [], [], set()
        pack: list[Any] = []
        used: set[int] = set()
        room = self.capacity
        for i in order:
            if lengths[i] <= room:
                pack.append(samples[i])
                used.add(i)
                room -= lengths[i]
                if room == 0:
                    break
                continue
            head, tail = self._cut(samples[i], room)
            pack.append(head)
            used.add(i)
            return pack, [tail], used
        return pack, [], used

    def _in_order(self, samples: Sequence[Any]) -> PackedSamplesOutput[Any]:
        """The stream's last buffer: packs in order, each split at its end."""
        packs: list[list[Any]] = [[]]
        room = self.capacity
        queue = list(samples)
        while queue:
            sample = queue.pop(0)
            length = self.sample_size(sample)
            if length > room:
                head, tail = self._cut(sample, room)
                packs[-1].append(head)
                queue.insert(0, tail)
                room = 0
            else:
                packs[-1].append(sample)
                room -= length
            if room == 0 and queue:
                packs.append([])
                room = self.capacity
        return PackedSamplesOutput(packs=[p for p in packs if p], pushback=[])

    def _cut(self, sample: Any, room: int) -> tuple[Any, Any]:
        """``sample`` split so that its head takes at most ``room`` tokens: (head, tail)."""
        whole, start, stop = token_window(sample, self.size)
        cut = start + room
        if self.split is not None:
            cut = int(self.split(whole, start, cut))
            if not start < cut <= start + room:
                raise StokerError(
                    f"TokenBudgetPacker: split returned {cut} for a sample at tokens "
                    f"[{start}, {stop}) with room for {room}; it must be in "
                    f"({start}, {start + room}].",
                    hint="Return a cut after start and no further than the room allows.",
                )
        return (
            PartialSample(sample=whole, slice=(start, cut)),
            PartialSample(sample=whole, slice=(cut, stop)),
        )
