"""The dataset recipe that ``get_train_dataset`` and friends return.

A :class:`LoaderDataset` is a small, picklable description: the data sources, the plan's
parameters, the task encoder and the topology. It computes nothing until a loader iterates it;
each dataloader worker then builds the streams it owns from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError
from stoker.model.task import ErrorPolicy, TaskEncoder, blend_sizer
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.pack_groups import GroupSizes, PackingGroups, check_setting, group_setting
from stoker.pipeline.refs import Position
from stoker.pipeline.schedule import BlendSpec, StreamSchedule, stream_allotments
from stoker.plan import StreamPlan, Topology
from stoker.plan.order import combine_multipliers
from stoker.plan.slices import blend_stream_sizes, rotations
from stoker.runtime.fingerprint import dataset_fingerprint
from stoker.runtime.logical_stride import Strides
from stoker.runtime.stream_spec import StreamSpec
from stoker.runtime.streams import DatasetStreams, Resume, rank_len, source_counts, stream_batches
from stoker.sources.source import DataSource


@dataclass
class LoaderDataset:
    """What to load and how; iterate it through :func:`stoker.get_loader`.

    Iterating the dataset itself loads in the calling process (like ``num_workers=0``).
    """

    sources: list[DataSource]
    worker_config: WorkerConfig
    task_encoder: TaskEncoder[Any, Any, Any, Any]
    batch_size: int | None
    batch_drop_last: bool = False
    training: bool = True
    repeat: bool = True
    limit: int | None = None
    virtual_epoch_length: int = 0
    #: One window for all datasets, or one per packing group (:mod:`~stoker.pipeline.pack_groups`).
    shuffle_buffer_size: GroupSizes = None
    max_samples_per_sequence: int | None = None
    parallel_shard_iters: int = 16
    shuffle_over_epochs_multiplier: int = 1
    virtual_workers: int = 1
    error_policy: ErrorPolicy = field(default_factory=ErrorPolicy)
    blend: BlendSpec = field(default_factory=BlendSpec)
    #: Pack encoded samples with the task encoder's packing hooks, from a buffer of this many
    #: (or one size per packing group: :mod:`stoker.pipeline.pack_groups`).
    packing_buffer_size: GroupSizes = None
    #: Batch by ``task_encoder.batch_group_criterion`` (explicit: never inferred).
    group_batches: bool = False
    #: ``virtual_workers`` is the default for this topology, not the caller's choice: a restore
    #: adopts the value the state was saved with (it is fixed at the first run).
    virtual_workers_defaulted: bool = False
    #: Per source, the ``(dataset id, rotation)`` its stream plans are keyed by (None: its index
    #: and its place in the blend). A restore into a changed mix keeps each dataset's own, so it
    #: continues in the same order (:mod:`stoker.runtime.mix_change`).
    plan_keys: tuple[tuple[int, int], ...] | None = None
    #: Per stream, the counts where the mix last changed: the blend draws from there.
    blend_origins: dict[int, tuple[int, ...]] | None = None
    #: Physical workers sharing each stream (Energon's logical workers below the physical ones:
    #: :mod:`stoker.runtime.logical_stride`); 1: each worker owns whole streams.
    fanout: int = 1

    def __post_init__(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(
                f"batch_size={self.batch_size} must be >= 1 (or None for no batching)."
            )
        check_setting(self.packing_buffer_size, "packing_buffer_size")
        check_setting(self.shuffle_buffer_size, "shuffle_buffer_size")
        self.packing_groups()  # a dict without an entry for a group fails here
        for source in self.sources:
            group_setting(self.shuffle_buffer_size, source.group, "shuffle_buffer_size")
        if self.blend.kind in ("weighted", "epochized") and len(self.blend.factors) != len(
            self.sources
        ):
            raise ConfigError("a blend needs one weight (or repetition count) per dataset.")
        self.topology()  # validates the topology early, in the caller's process
        if self.repeat is False and self.blend.kind == "weighted":
            raise ConfigError(
                "a weighted blend needs repeat=True (it has no end).",
                hint="Use blend_epochized in the metadataset for a finite blend with repeat=False.",
            )

    def with_virtual_workers(self, virtual_workers: int) -> LoaderDataset | None:
        """This dataset over ``virtual_workers`` streams if its count was defaulted, else None."""
        if not self.virtual_workers_defaulted:
            return None
        return dataclasses.replace(self, virtual_workers=virtual_workers)

    @property
    def source(self) -> DataSource:
        """The first (for a single dataset, the only) data source."""
        return self.sources[0]

    def topology(self) -> Topology:
        """The loader's streams over ranks and workers (with a :attr:`fanout`, one slot per
        physical worker: :class:`~stoker.runtime.logical_stride.Strides`)."""
        wc = self.worker_config
        return Topology(
            virtual_workers=self.virtual_workers * self.fanout,
            world_size=wc.world_size,
            rank=wc.rank,
            num_workers=wc.num_workers,
        )

    def plan(self, stream: int, dataset: int = 0) -> StreamPlan:
        """The reference plan of one stream over one of the data sources."""
        ordered = not self.training
        source = self.sources[dataset]
        dataset_id, rotation = self.plan_key(dataset)
        return StreamPlan(
            source.counts,
            stream,
            self.virtual_workers,
            seed=self.worker_config.seed_offset,
            dataset_id=dataset_id,
            max_samples_per_sequence=self.max_samples_per_sequence,
            parallel_shard_iters=1 if ordered else self.parallel_shard_iters,
            shuffle_buffer_size=0
            if ordered
            else (
                group_setting(self.shuffle_buffer_size, source.group, "shuffle_buffer_size") or 0
            ),
            shuffle_over_epochs_multiplier=combine_multipliers(
                self.shuffle_over_epochs_multiplier, source.shuffle_over_epochs_multiplier
            ),
            ordered=ordered,
            excluded=source.excluded,
            rotation=rotation,
        )

    def plan_key(self, dataset: int) -> tuple[int, int]:
        """The ``(dataset id, rotation)`` that key source ``dataset``'s stream plans."""
        if self.plan_keys is not None:
            return self.plan_keys[dataset]
        totals = [s.total for s in self.sources]
        return dataset, int(rotations(totals, self.virtual_workers)[dataset])

    def strides(self) -> Strides | None:
        """Which plan stream each loader stream (slot) runs, where workers share streams."""
        if self.fanout == 1:
            return None
        wc = self.worker_config
        return Strides(self.virtual_workers, wc.world_size, wc.num_workers)

    def schedule(self, stream: int) -> StreamSchedule:
        """The blend of all sources for one (loader) stream."""
        strides = self.strides()
        if strides is not None:
            stream = strides.slot(stream)[0]
        allotments: list[int] = []
        if self.blend.kind == "epochized":
            totals = [s.total for s in self.sources]
            sizes = blend_stream_sizes(totals, self.virtual_workers)
            allotments = stream_allotments(sizes, self.blend.factors, stream)
        return StreamSchedule(
            [self.plan(stream, d) for d in range(len(self.sources))],
            self.blend,
            seed=self.worker_config.seed_offset,
            stream=stream,
            repeat=self.repeat,
            allotments=allotments,
            batch_size=self.batch_size or 1,
            virtual_workers=self.virtual_workers,
            sized=self.sized_blend,
            origin=(self.blend_origins or {}).get(stream),
        )

    def stream_spec(self, stream: int) -> StreamSpec:
        return StreamSpec(
            sources=self.sources,
            schedule=self.schedule(stream),
            task_encoder=self.task_encoder,
            batch_size=self.batch_size,
            drop_last=self.batch_drop_last,
            packing_buffer_size=self.packing_size,
            group_batches=self.group_batches,
            packing_groups=self.packing_groups(),
        )

    def packing_groups(self) -> PackingGroups | None:
        """The packing groups of the sources, where packing is on and a source has a group or
        the size is a dict (else None: one buffer of :attr:`packing_size`)."""
        if self.packing_size is None:
            return None
        groups = PackingGroups.of([s.group for s in self.sources], self.packing_buffer_size)
        if not groups.named and not isinstance(self.packing_buffer_size, dict):
            return None
        return groups

    @property
    def packing_size(self) -> int | None:
        """The packing buffer size, or, per group, the largest (None: no packing at all)."""
        setting = self.packing_buffer_size
        if not isinstance(setting, Mapping):
            return setting
        sizes = [size for size in setting.values() if size is not None]
        return max(sizes) if sizes else None

    def fingerprint(self) -> dict[str, Any]:
        """The configuration a saved loader state is only valid for: the recipe's fields and a
        hash of the whole normalised recipe (:mod:`stoker.runtime.fingerprint`)."""
        return dataset_fingerprint(self)

    def mix_entries(self) -> list[dict[str, Any]]:
        """Per source its identity, plan key and content hash (``state["datasets"]``, see
        :mod:`stoker.runtime.mix_change`)."""
        from stoker.runtime.mix_change import entries

        return entries(self)

    def open_streams(self, streams: Sequence[int], resume: Resume) -> DatasetStreams:
        """The batches of ``streams`` in this process (a dataloader worker's share)."""
        return DatasetStreams(self, streams, resume)

    def source_counts(self, positions: Mapping[int, Position], epoch: int) -> dict[str, int]:
        """References each source contributed to streams at ``positions`` (see
        :meth:`stoker.Loader.samples_per_dataset`)."""
        return source_counts(self, positions, epoch)

    def can_restore_sample(self) -> bool:
        from stoker.runtime.restore_sample import can_restore

        return can_restore(self)

    def restore_sample(self, restore_key: Sequence[Any]) -> Any:
        """The sample or batch whose ``__restore_key__`` is ``restore_key``, loaded again."""
        from stoker.runtime.restore_sample import restore_item

        return restore_item(self, restore_key)

    @property
    def sized_blend(self) -> bool:
        """Whether the blend balances sample sizes (a weighted blend, and the task encoder
        defines ``blend_sample_size``: :mod:`stoker.plan.sized_blend`)."""
        return self.blend.kind == "weighted" and blend_sizer(self.task_encoder) is not None

    def position_size(self) -> int:
        """A stream position is the references taken per source (then, for a sized blend, the
        size totals per source), then the outputs used."""
        return len(self.sources) * (2 if self.sized_blend else 1) + 1

    def stream_len(self, stream: int) -> int:
        strides = self.strides()
        if strides is None:
            return stream_batches(self, stream)
        return strides.kept(stream_batches(self, stream), strides.slot(stream)[1])

    def __iter__(self) -> Iterator[Any]:
        from stoker.runtime.loader import Loader

        with Loader(self, in_process=True) as loader:
            yield from loader

    def __len__(self) -> int:
        """Batches per pass over a finite dataset (val), or ``virtual_epoch_length``."""
        return rank_len(self)
