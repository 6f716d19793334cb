"""What ``Loader.stats()`` returns (:class:`LoaderStats`) and the target shares of a blend.

Plain dataclasses of numbers, strings and dicts: they pickle (``global_stats`` gathers them over
ranks), turn into JSON with ``dataclasses.asdict``, and flatten into ``{"data/wait_frac": ...}``
for TensorBoard or W&B (:meth:`LoaderStats.flat`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Above this fraction of recent wall time waiting for data, the run is data-bound.
DATA_BOUND = 0.1


@dataclass
class WorkerStats:
    """One worker: busy seconds, the fraction of its time it was busy, memory."""

    busy_s: float = 0.0
    #: Busy seconds / wall seconds (near 1: the worker never waits for the loop).
    utilisation: float = 0.0
    #: Resident memory (bytes) at its last report.
    rss: int = 0
    #: Shared-memory batch slots it holds, and their bytes.
    slots: int = 0
    slot_bytes: int = 0


@dataclass
class DatasetShare:
    """One data source of a blend: references taken, realised share, target share."""

    samples: int = 0
    share: float = 0.0
    #: The share its weight asks for (None where the loader has no target: a plain dataset).
    #: Under weight schedules: the mean scheduled share over the same window as ``share`` (the
    #: global batches this rank handed out since the start or the last reset).
    target: float | None = None


@dataclass
class LoaderStats:
    """Figures of a loader since it started (or since ``stats(reset=True)``).

    ``recent_*`` cover about the last 60 s. Seconds per stage are added over all workers and
    are *exclusive* (``read`` does not include ``decode``). ``bound`` says ``"data"`` when the
    loop recently spent more than 10 % of its time waiting for batches, else ``"consumer"``;
    ``bottleneck`` is the worker stage that took the most time.
    """

    seconds: float = 0.0
    batches: int = 0
    samples: int = 0
    samples_per_s: float = 0.0
    recent_samples_per_s: float = 0.0
    #: Seconds from the loader's creation to its first batch (None: none yet).
    first_batch_s: float | None = None
    #: Seconds the loop spent blocked in ``next()``, and that as a fraction of its time.
    data_wait_s: float = 0.0
    data_wait_frac: float = 0.0
    recent_wait_frac: float = 0.0
    #: Mean seconds between two ``next()`` calls (the consumer's step).
    step_s: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: Worker busy time outside the named stages (iteration glue, shuffling, planning).
    other_s: float = 0.0
    bottleneck: str | None = None
    bound: str | None = None
    workers: dict[int, WorkerStats] = field(default_factory=dict)
    #: Skips by reason, by dataset (source path) and reason, and a few example keys.
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_by_dataset: dict[str, dict[str, int]] = field(default_factory=dict)
    skip_examples: dict[str, list[str]] = field(default_factory=dict)
    datasets: dict[str, DatasetShare] = field(default_factory=dict)
    #: requests, bytes, retries, read_ahead_hits / _misses / _hit_rate (present when non-zero).
    storage: dict[str, float] = field(default_factory=dict)
    #: Packing (present once a pack was selected): ``packs``, ``samples_per_pack``,
    #: ``pushed_back``, and ``fill_ratio`` where the task encoder gives sizes
    #: (:mod:`stoker.pipeline.pack_stats`).
    packing: dict[str, float] = field(default_factory=dict)
    #: Shared-memory batch slots held by all workers, and their bytes.
    shm_slots: int = 0
    shm_bytes: int = 0
    #: Batch tensors the workers built in fresh shared memory because every slot was held (by
    #: batches the loop keeps, or that wait in the queue): each costs its page faults.
    slot_fallbacks: int = 0
    #: Claims of a slot that waited (for the slot table's lock: workers never wait for a slot),
    #: the seconds they waited in all, and the longest wait.
    slot_waits: int = 0
    slot_wait_s: float = 0.0
    slot_wait_max_s: float = 0.0

    def flat(self, prefix: str = "data/") -> dict[str, float]:
        """Numbers under flat names, for ``SummaryWriter.add_scalars`` or ``wandb.log``.

        Example:
            >>> LoaderStats(batches=3, data_wait_frac=0.25).flat()["data/wait_frac"]
            0.25
        """
        out: dict[str, float] = {
            "batches": self.batches,
            "samples": self.samples,
            "samples_per_s": self.samples_per_s,
            "recent_samples_per_s": self.recent_samples_per_s,
            "wait_s": self.data_wait_s,
            "wait_frac": self.data_wait_frac,
            "recent_wait_frac": self.recent_wait_frac,
            "step_s": self.step_s,
            "skipped": sum(self.skipped.values()),
            "shm_bytes": self.shm_bytes,
            "slot_fallbacks": self.slot_fallbacks,
            "slot_wait_s": self.slot_wait_s,
        }
        out.update({f"stage/{s}_s": v for s, v in self.stage_seconds.items()})
        out.update({f"skipped/{r}": n for r, n in self.skipped.items()})
        out.update({f"storage/{k}": v for k, v in self.storage.items()})
        out.update({f"packing/{k}": v for k, v in self.packing.items()})
        for w, worker in self.workers.items():
            out[f"worker{w}/utilisation"] = worker.utilisation
            out[f"worker{w}/rss"] = worker.rss
        for name, ds in self.datasets.items():
            out[f"share/{name}"] = ds.share
        return {prefix + k: float(v) for k, v in out.items()}


def bound_of(recent_wait_frac: float, batches: int) -> str | None:
    """``"data"`` or ``"consumer"`` (None before the first batch)."""
    if batches == 0:
        return None
    return "data" if recent_wait_frac > DATA_BOUND else "consumer"


def shares(taken: dict[str, int], targets: dict[str, float] | None) -> dict[str, DatasetShare]:
    """Per source: samples taken, realised share and target share."""
    total = sum(taken.values())
    return {
        name: DatasetShare(n, n / total if total else 0.0, (targets or {}).get(name))
        for name, n in taken.items()
    }


def target_shares(dataset: Any, batches: Any = None) -> dict[str, float] | None:
    """The share of references each source should give: a weighted blend's normalised
    weights, an epochized blend's repetitions times source length, a ``MixBatchDataset``'s
    weights (per sub-batch) times its datasets' batch sizes and their own shares (None where
    there is no target). A blend with weight schedules: the mean of its shares over the global
    batch indices ``batches`` (an array; None or empty: at batch 0)."""
    weights = getattr(dataset, "weights", None)
    parts = getattr(dataset, "datasets", None)
    if weights is not None and parts is not None:  # a MixBatchDataset: weights per sub-batch
        out: dict[str, float] = {}
        sizes = [
            w * (getattr(p, "batch_size", None) or 1) for w, p in zip(weights, parts, strict=True)
        ]
        total = sum(sizes)
        for size, part in zip(sizes, parts, strict=True):
            inner = target_shares(part) or _single(part)
            if inner is None:
                return None
            for name, share in inner.items():
                out[name] = out.get(name, 0.0) + size / total * share
        return out
    blend = getattr(dataset, "blend", None)
    sources = getattr(dataset, "sources", None)
    if blend is None or sources is None or blend.kind not in ("weighted", "epochized"):
        return None
    factors = list(blend.factors)
    schedule = getattr(blend, "schedule", None)
    if schedule is not None and batches is not None and len(batches):
        factors = schedule.at(batches).mean(axis=1).tolist()
    if blend.kind == "epochized":
        factors = [f * s.total for f, s in zip(factors, sources, strict=True)]
    total = sum(factors)
    out = {}
    for factor, source in zip(factors, sources, strict=True):
        out[source.path] = out.get(source.path, 0.0) + factor / total
    return out


def _single(dataset: Any) -> dict[str, float] | None:
    sources = getattr(dataset, "sources", None)
    if not sources or len(sources) != 1:
        return None
    return {sources[0].path: 1.0}
