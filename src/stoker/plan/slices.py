"""A split as integers: the compacted sample space, stream ranges and slices.

Samples are numbered globally across the split's shards in order (``shard_counts`` gives the
samples per shard). Excluded samples (sorted global indices) are removed: position ``i`` of the
*compacted* space is the ``i``-th non-excluded global index. With ``N`` non-excluded samples,
the ``V`` streams own consecutive ranges in stream order: each holds ``N // V`` samples, and the
``N % V`` streams ``rotation, rotation + 1, ...`` (mod ``V``) one more (:func:`stream_sizes`).
Consecutive streams sit on different ranks, so the extra samples spread over ranks and workers
(±1), and a blend rotates each dataset's extras by the samples of the datasets before it (as
Energon does): with fewer samples than streams, every stream still gets samples from some
dataset.

A stream's range is cut into *slices*: at every shard boundary, then each shard piece of length
``L`` into ``ceil(L / msps)`` nearly equal slices of at most ``max_samples_per_sequence`` (msps)
samples. Boundaries come from the original shard offsets, so a slice never crosses a shard;
lengths count non-excluded samples only. Everything is vectorised: no per-sample objects.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from stoker.errors import ConfigError

Int64Array = NDArray[np.int64]


def as_counts(shard_counts: npt.ArrayLike) -> Int64Array:
    """``shard_counts`` as a 1-D int64 array of non-negative counts (raises ValueError)."""
    counts = np.asarray(shard_counts)
    if counts.ndim != 1 or not (counts.size == 0 or np.issubdtype(counts.dtype, np.integer)):
        raise ConfigError(f"shard_counts must be a 1-D array of integers, got {counts.shape=}.")
    if counts.size and int(counts.min()) < 0:
        raise ConfigError("shard_counts must be >= 0 (samples per shard).")
    return counts.astype(np.int64, copy=False)


def as_excluded(excluded: npt.ArrayLike | None, total: int) -> Int64Array:
    """``excluded`` as a sorted, unique int64 array of global indices in ``[0, total)``."""
    out = np.zeros(0, np.int64) if excluded is None else np.asarray(excluded, dtype=np.int64)
    if out.ndim != 1:
        raise ConfigError(f"excluded must be a 1-D array of global indices, got {out.shape=}.")
    if out.size and (np.any(np.diff(out) <= 0) or out[0] < 0 or out[-1] >= total):
        raise ConfigError(
            f"excluded must be strictly increasing global indices in [0, {total}); "
            "sort and deduplicate it (np.unique)."
        )
    return out


def exclusion_shift(excluded: Int64Array) -> Int64Array:
    """``excluded[i] - i``: the table :func:`compact_to_global` searches."""
    return excluded - np.arange(excluded.size, dtype=np.int64)


def compact_to_global(compact: Int64Array, shift: Int64Array) -> Int64Array:
    """Map compacted positions to global indices (``shift`` from :func:`exclusion_shift`).

    Example:
        >>> shift = exclusion_shift(np.array([1, 2, 5]))
        >>> compact_to_global(np.arange(4), shift).tolist()
        [0, 3, 4, 6]
    """
    if shift.size == 0:
        return compact
    return compact + np.searchsorted(shift, compact, side="right").astype(np.int64)


def compact_shard_offsets(counts: Int64Array, excluded: Int64Array) -> Int64Array:
    """Shard start offsets in the compacted space, plus the end (length ``len(counts) + 1``)."""
    offsets = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets - np.searchsorted(excluded, offsets, side="left").astype(np.int64)


def stream_sizes(num_samples: int, virtual_workers: int, rotation: int = 0) -> Int64Array:
    """Samples per stream: ``N // V`` each, plus one for the ``N % V`` streams from ``rotation``.

    Example:
        >>> stream_sizes(10, 4).tolist(), stream_sizes(10, 4, rotation=3).tolist()
        ([3, 3, 2, 2], [3, 2, 2, 3])
    """
    base, extra = divmod(num_samples, virtual_workers)
    sizes = np.full(virtual_workers, base, dtype=np.int64)
    sizes[(rotation + np.arange(extra, dtype=np.int64)) % virtual_workers] += 1
    return sizes


def rotations(totals: npt.ArrayLike, virtual_workers: int) -> Int64Array:
    """Per dataset of a blend: the samples of the datasets before it, mod ``V`` (where its
    extra samples start, see :func:`stream_sizes`).

    Example:
        >>> rotations([55, 7, 55], 100).tolist()
        [0, 55, 62]
    """
    sizes = np.asarray(totals, dtype=np.int64)
    before = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    return before % virtual_workers


def blend_stream_sizes(totals: npt.ArrayLike, virtual_workers: int) -> Int64Array:
    """``(D, V)``: the samples each stream holds of each dataset of a blend (rotated).

    Example:
        >>> blend_stream_sizes([3, 2], 4).tolist()
        [[1, 1, 1, 0], [1, 0, 0, 1]]
    """
    sizes = np.asarray(totals, dtype=np.int64)
    starts = rotations(sizes, virtual_workers).tolist()
    rows = [stream_sizes(int(t), virtual_workers, r) for t, r in zip(sizes, starts, strict=True)]
    return np.stack(rows) if rows else np.zeros((0, virtual_workers), np.int64)


def stream_range(
    num_samples: int, stream: int, virtual_workers: int, rotation: int = 0
) -> tuple[int, int]:
    """The compacted range of ``stream``: consecutive, of the size :func:`stream_sizes` gives.

    Example:
        >>> [stream_range(10, v, 4) for v in range(4)]
        [(0, 3), (3, 6), (6, 8), (8, 10)]
        >>> [stream_range(2, v, 4, rotation=3) for v in range(4)]
        [(0, 1), (1, 1), (1, 1), (1, 2)]
    """
    base, extra = divmod(num_samples, virtual_workers)
    rho = rotation % virtual_workers
    # streams before ``stream`` that hold an extra sample: [rho, rho + extra) cut at V, wrapped
    before = min(max(stream - rho, 0), extra) + min(stream, max(rho + extra - virtual_workers, 0))
    lo = stream * base + before
    return lo, lo + base + int((stream - rho) % virtual_workers < extra)


def cut_slices(
    offsets: Int64Array, lo: int, hi: int, max_samples_per_sequence: int | None
) -> tuple[Int64Array, Int64Array]:
    """Cut ``[lo, hi)`` at shard ``offsets`` and into slices of <= msps; ``(starts, lengths)``.

    Example (shards of 5 and 7 samples, msps 3):
        >>> starts, lengths = cut_slices(np.array([0, 5, 12]), 2, 12, 3)
        >>> starts.tolist(), lengths.tolist()
        ([2, 5, 7, 9], [3, 2, 2, 3])
    """
    first = int(np.searchsorted(offsets, lo, side="right"))
    last = int(np.searchsorted(offsets, hi, side="left"))
    bounds = np.concatenate(([lo], offsets[first:last], [hi])).astype(np.int64)
    keep = np.diff(bounds) > 0
    piece_start, piece_len = bounds[:-1][keep], np.diff(bounds)[keep]
    if max_samples_per_sequence is None:
        return piece_start, piece_len
    per_piece = -(-piece_len // max_samples_per_sequence)
    piece_of = np.repeat(np.arange(piece_len.size), per_piece)
    j = np.arange(piece_of.size, dtype=np.int64) - (np.cumsum(per_piece) - per_piece)[piece_of]
    length, parts = piece_len[piece_of], per_piece[piece_of]
    begin = j * length // parts
    end = (j + 1) * length // parts
    return piece_start[piece_of] + begin, end - begin


def global_to_shard(
    shard_counts: npt.ArrayLike, refs: npt.ArrayLike
) -> tuple[Int64Array, Int64Array]:
    """Split global sample indices into ``(shard_ids, local_indices)``.

    Example:
        >>> shards, local = global_to_shard([3, 0, 2], [0, 2, 3, 4])
        >>> shards.tolist(), local.tolist()
        ([0, 0, 2, 2], [0, 2, 0, 1])
    """
    counts = as_counts(shard_counts)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    indices = np.asarray(refs, dtype=np.int64)
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= total):
        raise ConfigError(f"refs must be global sample indices in [0, {total}).")
    shard_ids = np.searchsorted(ends, indices, side="right").astype(np.int64)
    return shard_ids, indices - (ends[shard_ids] - counts[shard_ids])
