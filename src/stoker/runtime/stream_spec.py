"""What a worker needs to run one stream: the recipe (:class:`StreamSpec`, picklable) and, per
data source, the reader and sample builder it made (:class:`SourceIO`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.model.task import TaskEncoder
from stoker.pipeline.pack_groups import PackingGroups
from stoker.pipeline.read import ShardReader
from stoker.pipeline.schedule import StreamSchedule
from stoker.runtime.build import SampleBuilder
from stoker.runtime.column_runs import applies as column_runs_apply
from stoker.sources.source import DataSource


@dataclass
class StreamSpec:
    """Everything a worker needs to run one stream (picklable)."""

    sources: list[DataSource]
    schedule: StreamSchedule
    task_encoder: TaskEncoder[Any, Any, Any, Any]
    batch_size: int | None
    drop_last: bool
    packing_buffer_size: int | None = None
    group_batches: bool = False
    #: Datasets packed in buffers of their own group (None: one buffer for all).
    packing_groups: PackingGroups | None = None


@dataclass
class SourceIO:
    """A worker's reader and sample builder for one data source."""

    reader: ShardReader
    builder: SampleBuilder

    def __post_init__(self) -> None:
        #: Whether runs are read and built as columns (:mod:`.column_runs`).
        self.columns = column_runs_apply(self.builder)


__all__ = ["SourceIO", "StreamSpec"]
