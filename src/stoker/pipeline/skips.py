"""What the loader skipped: counts by reason and by source dataset, with a few example keys.

Plain data (dicts of ``str`` and ``int``), so that it travels from the dataloader workers to the
main process with the batches they send anyway, merges by adding, and prints as JSON. A
worker's :class:`~stoker.pipeline.skip_policy.ErrorTracker` collects what it skipped since its
last batch; the loader adds those up (:meth:`stoker.runtime.loader.Loader.skipped`).

A *reason* names the stage and what happened, e.g. ``"encode_batch: ValueError"``,
``"encode_sample: SkipSample"`` (skipped on purpose), :data:`STORAGE`, :data:`CORRUPT_SHARD`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A sample whose read failed on every retry (a :class:`~stoker.errors.TransientStorageError`).
STORAGE = "storage: retries exhausted"
#: The sample whose read found its shard damaged (a :class:`~stoker.errors.CorruptShardError`).
CORRUPT_SHARD = "shard: corrupt"
#: A sample not read because an earlier read found its shard damaged in this pass.
REST_OF_SHARD = "shard: rest of a corrupt shard"
#: Example keys kept per reason.
EXAMPLES = 3


@dataclass
class Skips:
    """Skipped samples (or batches) by reason, by source and reason, and example keys.

    Example:
        >>> skips = Skips()
        >>> skips.add("encode_sample: ValueError", source="/data/coco", key="000017")
        >>> skips.merge(Skips({"encode_sample: ValueError": 2}))
        >>> skips.by_reason, skips.total
        ({'encode_sample: ValueError': 3}, 3)
        >>> skips.by_source
        {'/data/coco': {'encode_sample: ValueError': 1}}
        >>> skips.examples
        {'encode_sample: ValueError': ['000017']}
    """

    #: Per reason: how many were skipped.
    by_reason: dict[str, int] = field(default_factory=dict)
    #: Per source dataset (its path), per reason: how many (where the source is known).
    by_source: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Per reason: the first few keys skipped (a sample's key, or where it came from).
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """All skips, whatever the reason."""
        return sum(self.by_reason.values())

    def __bool__(self) -> bool:
        return bool(self.by_reason)

    def add(
        self, reason: str, *, source: str | None = None, key: str | None = None, count: int = 1
    ) -> None:
        """Count ``count`` skips for ``reason`` (from ``source``; ``key`` as an example)."""
        self.by_reason[reason] = self.by_reason.get(reason, 0) + count
        if source is not None:
            per = self.by_source.setdefault(source, {})
            per[reason] = per.get(reason, 0) + count
        if key is not None:
            keys = self.examples.setdefault(reason, [])
            if len(keys) < EXAMPLES and key not in keys:
                keys.append(key)

    def merge(self, other: Skips) -> None:
        """Add ``other``'s counts (and examples, up to :data:`EXAMPLES` per reason)."""
        for reason, n in other.by_reason.items():
            self.by_reason[reason] = self.by_reason.get(reason, 0) + n
        for source, counts in other.by_source.items():
            per = self.by_source.setdefault(source, {})
            for reason, n in counts.items():
                per[reason] = per.get(reason, 0) + n
        for reason, keys in other.examples.items():
            mine = self.examples.setdefault(reason, [])
            mine.extend(k for k in keys if k not in mine)
            del mine[EXAMPLES:]

    def take(self) -> Skips | None:
        """A copy of the counts, which are then cleared here (None if there were none)."""
        if not self:
            return None
        taken = self.copy()
        self.by_reason.clear()
        self.by_source.clear()
        self.examples.clear()
        return taken

    def copy(self) -> Skips:
        """An independent copy."""
        out = Skips()
        out.merge(self)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: ``{"total", "by_reason", "by_source", "examples"}``."""
        return {
            "total": self.total,
            "by_reason": dict(self.by_reason),
            "by_source": {s: dict(c) for s, c in self.by_source.items()},
            "examples": {r: list(k) for r, k in self.examples.items()},
        }


#: With ``repeat=True`` a pass never ends: the storage share is checked every this many samples
#: (delivered + skipped), and at the end of a pass for what is left.
STORAGE_WINDOW = 10_000


def check_storage_share(
    skipped: int, samples: int, share: float, epoch: int, *, window: bool = False
) -> None:
    """At the end of a pass (or of a :data:`STORAGE_WINDOW` of it, ``window``): raise if more
    than ``share`` of its samples were skipped because the storage failed on every retry
    (``skipped`` of ``samples`` delivered + skipped), else log one warning with the count if any
    were.

    Example:
        >>> check_storage_share(0, 100, 0.01, 0)
        >>> check_storage_share(5, 95, 0.01, 0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stoker.errors.StorageError: pass 0 ended short: 5 of its 100 samples were skipped ...
        >>> check_storage_share(200, 9800, 0.01, 3, window=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stoker.errors.StorageError: pass 3 is running short: 200 of its last 10000 samples ...
    """
    if skipped <= 0:
        return
    total = samples + skipped
    if skipped > share * total:
        from stoker.errors import StorageError

        what = (
            f"is running short: {skipped} of its last"
            if window
            else f"ended short: {skipped} of its"
        )
        raise StorageError(
            f"pass {epoch} {what} {total} samples were skipped because "
            f"their reads failed after every retry ({skipped / total:.1%}, more than the "
            f"{share:.1%} allowed).",
            hint="Check the storage (the log names the reads that failed), or allow more with "
            "LoaderOptions(max_storage_skip_share=...).",
        )
    import logging

    logging.getLogger("stoker").warning(
        "pass %d skipped %d of its %s%d samples because their reads failed after every retry",
        epoch,
        skipped,
        "last " if window else "",
        total,
    )
