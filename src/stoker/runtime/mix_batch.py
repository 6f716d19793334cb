"""``MixBatchDataset``: batches made of whole batches of several datasets, chosen by weight.

For tasks that must not mix within a batch (different sequence lengths, image sizes or losses per
dataset), each dataset is batched on its own and every output joins ``batch_size`` whole
sub-batches: ``batch_mix_fn([sub_batch_1, ..., sub_batch_n])``. It runs over the same streams
(virtual workers) as its datasets, in the dataloader workers, and saves and restores exactly: a
mixed stream's position is its datasets' stream positions plus the sub-batches taken from each
(see :mod:`stoker.pipeline.mix`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.batch import batch_list
from stoker.pipeline.mix import MixSpec, MixStream, SubState, decode, encode
from stoker.pipeline.refs import Position
from stoker.pipeline.skips import Skips
from stoker.plan import Topology
from stoker.plan.rng import MIX_BATCH, keyed_rng
from stoker.plan.weights import Weight, WeightSchedule, weight_config
from stoker.runtime.logical_stride import refuse_shared_streams
from stoker.runtime.streams import (
    Loadable,
    OpenStreams,
    Resume,
    StreamBatches,
    over_virtual_workers,
    rank_len,
    take_skips,
)


class MixBatchDataset:
    """Blend whole batches of several datasets by weight, ``batch_size`` of them per output.

    Args:
        *dataset_weights: ``(dataset, weight)`` pairs: datasets from ``get_train_dataset``
            (batched as each needs) or wrappers of them, with the same ``worker_config`` and
            ``virtual_workers``.
        batch_size: Sub-batches per output.
        batch_mix_fn: Joins the list of sub-batches into the output; may return a generator
            (several outputs) or raise :class:`~stoker.SkipSample`. Default: keep the list.
            :func:`~stoker.homogeneous_concat_mix` concatenates batches of one type.
        worker_config: The datasets' worker configuration.
        virtual_epoch_length: If > 0, each ``for`` loop over the loader stops after this many
            outputs (stoker only).

    Example:
        >>> from stoker import get_loader, get_train_dataset, homogeneous_concat_mix
        >>> coco, coyo = (
        ...     get_train_dataset(name, worker_config=wc, batch_size=2, shuffle_buffer_size=None,
        ...                       max_samples_per_sequence=None)
        ...     for name in ("coco-wds", "coyo-wds")
        ... )
        >>> mix = MixBatchDataset(
        ...     (coco, 0.7), (coyo, 0.3),
        ...     batch_size=4, batch_mix_fn=homogeneous_concat_mix, worker_config=wc,
        ... )
        >>> batch = next(iter(get_loader(mix)))  # 4 whole sub-batches of 2, concatenated
        >>> batch.image.shape
        torch.Size([8, 3, 48, 64])
    """

    def __init__(
        self,
        *dataset_weights: tuple[Loadable, Weight],
        batch_size: int,
        batch_mix_fn: Callable[[list[Any]], Any] = batch_list,
        worker_config: WorkerConfig,
        virtual_epoch_length: int = 0,
    ) -> None:
        self.datasets, self.weights = _check_pairs(dataset_weights, type(self).__name__)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"{batch_size=} must be an integer >= 1 (sub-batches per batch).")
        _check_topology(self.datasets, worker_config)
        self.batch_size = batch_size
        self.batch_mix_fn = batch_mix_fn
        self.worker_config = worker_config
        self.virtual_epoch_length = virtual_epoch_length
        self.limit: int | None = None

    def topology(self) -> Topology:
        return self.datasets[0].topology()

    def with_virtual_workers(self, virtual_workers: int) -> MixBatchDataset | None:
        """The mix over ``virtual_workers`` streams if every dataset's count was defaulted."""
        return over_virtual_workers(self, self.datasets, virtual_workers)

    def fingerprint(self) -> dict[str, Any]:
        """The configuration a saved state is only valid for: the mix and each dataset's."""
        out: dict[str, Any] = {
            "mix_batch_weights": [weight_config(w) for w in self.weights],
            "mix_batch_size": self.batch_size,
            "mix_batch_fn": getattr(self.batch_mix_fn, "__qualname__", repr(self.batch_mix_fn)),
        }
        for d, dataset in enumerate(self.datasets):
            out.update({f"mix[{d}].{k}": v for k, v in dataset.fingerprint().items()})
        return out

    def open_streams(self, streams: Sequence[int], resume: Resume) -> MixedStreams:
        """The mixed batches of ``streams`` in this process (a dataloader worker's share)."""
        return MixedStreams(self, streams, resume)

    def mix_spec(self, stream: int, epoch: int) -> MixSpec:
        """How stream ``stream`` mixes in pass ``epoch`` (its own keyed seed)."""
        seed = int(keyed_rng(self.worker_config.seed_offset, MIX_BATCH, epoch).integers(2**62))
        return MixSpec(self.weights, self.batch_size, self.batch_mix_fn, seed, stream,
                       self.topology().virtual_workers)  # fmt: skip

    def source_counts(self, positions: Mapping[int, Position], epoch: int) -> dict[str, int]:
        """References each source of each dataset contributed to streams at ``positions``."""
        totals: dict[str, int] = {}
        decoded = {s: decode(p, None, self.sizes())[0] for s, p in positions.items()}
        for d, dataset in enumerate(self.datasets):
            own = {s: subs[d].position for s, subs in decoded.items()}
            for name, count in dataset.source_counts(own, epoch).items():
                totals[name] = totals.get(name, 0) + count
        return totals

    def sizes(self) -> list[int]:
        """Per dataset, its position size less one (the layout of a mixed stream's position)."""
        return [dataset.position_size() - 1 for dataset in self.datasets]

    def position_size(self) -> int:
        return sum(n + 3 for n in self.sizes()) + 1

    def stream_len(self, stream: int) -> int:
        """All datasets' sub-batches of a pass of ``stream``, ``batch_size`` at a time."""
        subs = sum(dataset.stream_len(stream) for dataset in self.datasets)
        return -(-subs // self.batch_size)

    def __len__(self) -> int:
        """Outputs per pass on this rank: all datasets' sub-batches of a pass, ``batch_size`` at
        a time per stream (one epoch of each for repeating datasets; exact for 1:1 functions)."""
        return rank_len(self)

    def __iter__(self) -> Iterator[Any]:
        from stoker.runtime.loader import Loader

        with Loader(self, in_process=True) as loader:
            yield from loader


class MixedStreams:
    """Mixed streams in one process: each dataset's streams there, mixed per stream."""

    def __init__(self, mix: MixBatchDataset, streams: Sequence[int], resume: Resume) -> None:
        sizes = mix.sizes()
        saved = {s: decode(p, resume.buffers.get(s), sizes) for s, p in resume.positions.items()}
        self.parts: list[OpenStreams] = []
        for d, dataset in enumerate(mix.datasets):
            own = Resume(
                positions={s: subs[d].position for s, (subs, _) in saved.items()},
                buffers={s: h for s, (subs, _) in saved.items() if (h := subs[d].held)},
                t=resume.t,
                epoch=resume.epoch,
            )
            self.parts.append(dataset.open_streams(streams, own))
        self.batches: dict[int, StreamBatches] = {}
        self.start: dict[int, Position] = {}
        for s in streams:
            start, skip = saved.get(s, ([SubState(part.start[s]) for part in self.parts], 0))
            self.start[s] = encode(start, skip)[0]
            subs = [part.batches[s] for part in self.parts]
            self.batches[s] = iter(MixStream(mix.mix_spec(s, resume.epoch), subs, start, skip))

    def take_skips(self) -> Skips | None:
        """What the mixed datasets' streams skipped since the last call (None if nothing)."""
        return take_skips(self.parts)

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _check_pairs(
    pairs: Sequence[tuple[Loadable, Weight]], owner: str
) -> tuple[list[Loadable], tuple[Weight, ...]]:
    if not pairs:
        raise ConfigError(f"{owner} needs at least one (dataset, weight) pair.")
    datasets: list[Loadable] = []
    weights: list[Weight] = []
    for i, pair in enumerate(pairs):
        ok = isinstance(pair, tuple) and len(pair) == 2 and hasattr(pair[0], "open_streams")
        if ok and isinstance(pair[1], WeightSchedule):
            datasets.append(pair[0])
            weights.append(pair[1])
            continue
        if not ok or isinstance(pair[1], bool) or not isinstance(pair[1], int | float):
            raise ConfigError(
                f"{owner} argument #{i} must be a (dataset, weight) pair, got {pair!r}.",
                hint="Pass (get_train_dataset(..., batch_size=...), 0.5) for each dataset.",
            )
        if not math.isfinite(pair[1]) or pair[1] <= 0:
            raise ConfigError(f"the weight of dataset #{i} must be finite and > 0, got {pair[1]}.")
        datasets.append(pair[0])
        weights.append(float(pair[1]))
    return datasets, tuple(weights)


def _check_topology(datasets: Sequence[Loadable], worker_config: WorkerConfig) -> None:
    """All datasets must run over the same streams as the mix."""
    first = datasets[0]
    for i, dataset in enumerate(datasets):
        refuse_shared_streams(dataset, f"MixBatchDataset (dataset #{i})")
        if dataset.worker_config != worker_config:
            raise ConfigError(
                f"dataset #{i} of the mix has {dataset.worker_config}, the mix {worker_config}.",
                hint="Make every dataset of a MixBatchDataset with the same WorkerConfig.",
            )
        v, v0 = dataset.topology().virtual_workers, first.topology().virtual_workers
        if v != v0:
            raise ConfigError(
                f"dataset #{i} of the mix has virtual_workers={v}, dataset #0 has {v0}.",
                hint="Pass the same virtual_workers=... to every get_train_dataset of the mix.",
            )
        if dataset.virtual_epoch_length or dataset.limit is not None:
            raise ConfigError(
                f"dataset #{i} of the mix sets virtual_epoch_length or limit, which a mix "
                "ignores (it reads its datasets' streams directly).",
                hint="Pass virtual_epoch_length to MixBatchDataset instead.",
            )
