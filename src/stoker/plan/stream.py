"""The read order of one stream (virtual worker) over a split, jump-computable at any position.

Training order of epoch ``e`` for stream ``v`` (seed ``s``, dataset id ``d``):

1. slice order: :func:`stoker.plan.order.epoch_slice_order` (permutation per epoch, or over
   groups of ``shuffle_over_epochs_multiplier`` epochs, or draws with replacement);
2. interleave: chunks of ``parallel_shard_iters`` consecutive slices read round-robin
   (:mod:`stoker.plan.interleave`);
3. window shuffle: positions ``[w*S, (w+1)*S)`` of the epoch are permuted with
   ``keyed_rng(s, WINDOW, d, v, e, w)`` (``S = shuffle_buffer_size``; ``S <= 1``: none).

Validation order (``ordered=True``): slices in order, no interleave, no shuffle; every epoch is
the same contiguous walk (the caller stops after one and applies ``limit``).

Any position ``[lo, hi)`` of an epoch is computed from the chunks and windows that overlap it,
never from the whole epoch; only small per-epoch arrays (slice order, chunk lengths) are cached.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError
from stoker.plan.interleave import Chunks
from stoker.plan.order import check_multiplier, epoch_slice_order
from stoker.plan.rng import WINDOW, keyed_rng
from stoker.plan.slices import (
    Int64Array,
    as_counts,
    as_excluded,
    compact_shard_offsets,
    compact_to_global,
    cut_slices,
    exclusion_shift,
    stream_range,
)


class RefBlock(NamedTuple):
    """``refs[i]`` is the global sample index at infinite-view position ``start + i``."""

    start: int
    refs: Int64Array


class StreamPlan:
    """Which global sample stream ``stream`` of ``virtual_workers`` reads at every position.

    Example:
        >>> plan = StreamPlan([6, 4], 0, 2, seed=1, parallel_shard_iters=1, ordered=True)
        >>> plan.epoch_length(0), plan.refs(0, 0, 5).tolist()
        (5, [0, 1, 2, 3, 4])
        >>> plan = StreamPlan([6, 4], 1, 2, seed=1, shuffle_buffer_size=3)
        >>> sorted(plan.refs(0, 0, 5).tolist()), plan.position(12)
        ([5, 6, 7, 8, 9], (2, 2))
    """

    def __init__(
        self,
        shard_counts: npt.ArrayLike,
        stream: int,
        virtual_workers: int,
        *,
        seed: int,
        dataset_id: int = 0,
        max_samples_per_sequence: int | None = None,
        parallel_shard_iters: int = 16,
        shuffle_buffer_size: int = 0,
        shuffle_over_epochs_multiplier: int = 1,
        ordered: bool = False,
        excluded: npt.ArrayLike | None = None,
        rotation: int = 0,
    ) -> None:
        _check_args(stream, virtual_workers, seed, dataset_id, max_samples_per_sequence)
        if parallel_shard_iters < 1:
            raise ConfigError(f"{parallel_shard_iters=} must be >= 1.")
        check_multiplier(shuffle_over_epochs_multiplier)
        counts = as_counts(shard_counts)
        excluded_ = as_excluded(excluded, int(counts.sum()))
        offsets = compact_shard_offsets(counts, excluded_)
        if rotation < 0:
            raise ConfigError(f"{rotation=} must be >= 0 (samples of the datasets before).")
        lo, hi = stream_range(int(offsets[-1]), stream, virtual_workers, rotation)
        self._starts, self._lengths = cut_slices(offsets, lo, hi, max_samples_per_sequence)
        self._shift = exclusion_shift(excluded_)
        self._key = (seed, dataset_id, stream)
        # multiplier 0: the slices in order every epoch (the interleave and window still apply)
        self._slices_in_order = ordered or shuffle_over_epochs_multiplier == 0
        self._multiplier = 1 if self._slices_in_order else shuffle_over_epochs_multiplier
        self._width = 1 if ordered else parallel_shard_iters
        self._window = 0 if ordered else shuffle_buffer_size
        self._num_samples = hi - lo
        self._chunks_of = functools.lru_cache(maxsize=4)(self._build_chunks)
        self._group_starts = functools.lru_cache(maxsize=2)(self._build_group_starts)
        # Consecutive blocks share their boundary window: keep the last few permutations.
        self._window_perm = functools.lru_cache(maxsize=8)(self._build_window_perm)
        self._epoch_starts = [0]  # memo for multiplier -1, where every epoch differs in length

    @property
    def stream(self) -> int:
        """The virtual worker this plan is for."""
        return self._key[2]

    @property
    def num_samples(self) -> int:
        """Samples in the stream's range (one epoch's length unless the multiplier is not 1)."""
        return self._num_samples

    @property
    def num_slices(self) -> int:
        """Number of slices the stream's range is cut into."""
        return int(self._lengths.size)

    def slices(self) -> tuple[Int64Array, Int64Array]:
        """Copies of the slices' ``(starts, lengths)`` in the compacted sample space."""
        return self._starts.copy(), self._lengths.copy()

    def epoch_length(self, epoch: int) -> int:
        """Number of positions in ``epoch``."""
        if self._multiplier == 1:
            return self._num_samples
        return self._chunks(epoch).total

    def refs(self, epoch: int, lo: int, hi: int) -> Int64Array:
        """Global sample indices at positions ``[lo, hi)`` of ``epoch``."""
        length = self.epoch_length(epoch)
        if not 0 <= lo <= hi <= length:
            raise ConfigError(f"need 0 <= lo <= hi <= epoch_length={length}, got {lo=}, {hi=}.")
        sources = self._window_sources(epoch, lo, hi, length)
        return compact_to_global(self._chunks(epoch).lookup(sources), self._shift)

    def position(self, p: int) -> tuple[int, int]:
        """``(epoch, offset)`` of position ``p`` of the infinite (repeating) view."""
        if p < 0:
            raise ConfigError(f"{p=} must be >= 0.")
        if self._num_samples == 0:
            raise ConfigError(
                "the stream has no samples; it has no infinite view (fewer streams?)."
            )
        if self.num_slices == 1:  # every epoch reads the one slice whole
            return divmod(p, self._num_samples)
        if self._multiplier == -1:
            while self._epoch_starts[-1] <= p:
                epoch = len(self._epoch_starts) - 1
                self._epoch_starts.append(self._epoch_starts[-1] + self.epoch_length(epoch))
            epoch = bisect.bisect_right(self._epoch_starts, p) - 1
            return epoch, p - self._epoch_starts[epoch]
        group, rest = divmod(p, self._multiplier * self._num_samples)
        starts = self._group_starts(group)
        index = bisect.bisect_right(starts, rest) - 1
        return group * self._multiplier + index, rest - starts[index]

    def refs_at(self, p_lo: int, p_hi: int) -> Int64Array:
        """Global sample indices at positions ``[p_lo, p_hi)`` of the infinite view."""
        if p_hi < p_lo:
            raise ConfigError(f"need p_lo <= p_hi, got {p_lo=}, {p_hi=}.")
        if p_hi == p_lo:
            return np.zeros(0, np.int64)
        if self.num_slices == 1 and p_hi - p_lo > self._num_samples:
            return self._one_slice_refs(p_lo, p_hi)
        epoch, offset = self.position(p_lo)
        parts, remaining = [], p_hi - p_lo
        while remaining > 0:
            take = min(remaining, self.epoch_length(epoch) - offset)
            parts.append(self.refs(epoch, offset, offset + take))
            remaining, epoch, offset = remaining - take, epoch + 1, 0
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def iter_refs(self, start_position: int = 0, block: int = 1024) -> Iterator[RefBlock]:
        """Endless blocks of ``block`` references of the infinite view from ``start_position``."""
        if block < 1:
            raise ConfigError(f"{block=} must be >= 1.")
        position = start_position
        while True:
            yield RefBlock(position, self.refs_at(position, position + block))
            position += block

    def slice_order(self, epoch: int) -> Int64Array:
        """Indices into :meth:`slices` in the order ``epoch`` visits them (before interleave)."""
        if self._slices_in_order:
            return np.arange(self.num_slices, dtype=np.int64)
        seed, dataset_id, stream = self._key
        return epoch_slice_order(
            self.num_slices,
            seed=seed,
            dataset_id=dataset_id,
            stream=stream,
            epoch=epoch,
            multiplier=self._multiplier,
        )

    def _chunks(self, epoch: int) -> Chunks:
        # One slice (or none), or slices in order, are read the same way in every epoch.
        return self._chunks_of(0 if self.num_slices <= 1 or self._slices_in_order else epoch)

    def _one_slice_refs(self, p_lo: int, p_hi: int) -> Int64Array:
        """``refs_at`` over many epochs of one slice (few samples per stream): every epoch has
        the same length and interleave, only its shuffle windows differ."""
        length = self._num_samples
        first, last = p_lo // length, (p_hi - 1) // length
        if self._window <= 1 or length <= 1:
            sources = np.arange(p_lo, p_hi, dtype=np.int64) % length
        else:
            sources = np.concatenate([
                self._window_sources(e, max(p_lo - e * length, 0),
                                     min(p_hi - e * length, length), length)
                for e in range(first, last + 1)
            ])  # fmt: skip
        return compact_to_global(self._chunks(0).lookup(sources), self._shift)

    def _build_chunks(self, epoch: int) -> Chunks:
        return Chunks.build(self.slice_order(epoch), self._starts, self._lengths, self._width)

    def _build_group_starts(self, group: int) -> list[int]:
        first = group * self._multiplier
        lengths = [self.epoch_length(first + i) for i in range(self._multiplier)]
        return [0, *np.cumsum(lengths)[:-1].tolist()]

    def _window_sources(self, epoch: int, lo: int, hi: int, length: int) -> Int64Array:
        """Positions of the interleaved sequence that the window shuffle puts at ``[lo, hi)``."""
        size = self._window
        if size <= 1 or lo == hi:
            return np.arange(lo, hi, dtype=np.int64)
        out = np.empty(hi - lo, np.int64)
        for window in range(lo // size, (hi - 1) // size + 1):
            begin = window * size
            perm = self._window_perm(epoch, window, min(size, length - begin))
            a, b = max(lo, begin), min(hi, begin + perm.size)
            out[a - lo : b - lo] = begin + perm[a - begin : b - begin]
        return out

    def _build_window_perm(self, epoch: int, window: int, size: int) -> Int64Array:
        if size <= 1:  # what the generator would give, without its cost
            return np.arange(size, dtype=np.int64)
        seed, dataset_id, stream = self._key
        rng = keyed_rng(seed, WINDOW, dataset_id, stream, epoch, window)
        return rng.permutation(size).astype(np.int64, copy=False)


def _check_args(
    stream: int, virtual_workers: int, seed: int, dataset_id: int, msps: int | None
) -> None:
    if virtual_workers < 1:
        raise ConfigError(f"{virtual_workers=} must be >= 1.")
    if not 0 <= stream < virtual_workers:
        raise ConfigError(f"{stream=} must be in [0, virtual_workers={virtual_workers}).")
    if seed < 0 or dataset_id < 0:
        raise ConfigError(f"{seed=} and {dataset_id=} must be >= 0.")
    if msps is not None and msps < 1:
        raise ConfigError(f"max_samples_per_sequence={msps} must be >= 1 or None (no limit).")
