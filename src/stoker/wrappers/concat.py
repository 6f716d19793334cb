"""``ConcatDataset``: each stream reads its stream of the first dataset, then of the next, ..."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.refs import Buffers, Position
from stoker.pipeline.skips import Skips
from stoker.plan import Topology
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
from stoker.wrappers.base import Mark, all_can_restore, check_inner, restore_from_any


class ConcatDataset:
    """The datasets one after the other, per stream (Energon concatenates per worker).

    A stream's position is every dataset's stream position, then which dataset it is reading.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> val_a, val_b = (get_val_dataset(name, split_part="val", batch_size=4, worker_config=wc)
        ...                 for name in ("coco-wds", "coyo-wds"))
        >>> both = ConcatDataset(val_a, val_b, worker_config=wc)
        >>> [len(batch.caption) for batch in get_loader(both)]
        [4, 4, 2, 4, 4, 2]
    """

    def __init__(self, *datasets: Loadable, worker_config: WorkerConfig) -> None:
        if not datasets:
            raise ConfigError("ConcatDataset needs at least one dataset.")
        for i, dataset in enumerate(datasets):
            check_inner(dataset, worker_config, f"ConcatDataset (dataset #{i})")
            refuse_shared_streams(dataset, f"ConcatDataset (dataset #{i})")
            if dataset.limit is not None or dataset.virtual_epoch_length:
                raise ConfigError(
                    f"dataset #{i} of a ConcatDataset sets limit or virtual_epoch_length, which "
                    "count the loader's outputs.",
                    hint="Wrap the ConcatDataset in LimitDataset / EpochizeDataset instead.",
                )
        first = datasets[0].topology().virtual_workers
        if any(d.topology().virtual_workers != first for d in datasets):
            raise ConfigError(
                "the datasets of a ConcatDataset run over different numbers of virtual_workers.",
                hint="Pass the same virtual_workers=... to every dataset.",
            )
        self.datasets = list(datasets)
        self.worker_config = worker_config
        self.limit: int | None = None
        self.virtual_epoch_length = 0

    def topology(self) -> Topology:
        return self.datasets[0].topology()

    def with_virtual_workers(self, virtual_workers: int) -> ConcatDataset | None:
        return over_virtual_workers(self, self.datasets, virtual_workers)

    def fingerprint(self) -> dict[str, Any]:
        out: dict[str, Any] = {"concat": len(self.datasets)}
        for d, dataset in enumerate(self.datasets):
            out.update({f"concat[{d}].{k}": v for k, v in dataset.fingerprint().items()})
        return out

    def position_size(self) -> int:
        return sum(d.position_size() for d in self.datasets) + 1

    def stream_len(self, stream: int) -> int:
        return sum(d.stream_len(stream) for d in self.datasets)

    def split(self, position: Position) -> tuple[list[Position], int]:
        """Each dataset's position and the dataset being read."""
        values, parts, at = position.to_list(), [], 0
        for dataset in self.datasets:
            size = dataset.position_size()
            parts.append(Position.from_list(values[at : at + size]))
            at += size
        return parts, values[at]

    def source_counts(self, positions: Mapping[int, Position], epoch: int) -> dict[str, int]:
        totals: dict[str, int] = {}
        split = {s: self.split(p)[0] for s, p in positions.items()}
        for d, dataset in enumerate(self.datasets):
            own = {s: parts[d] for s, parts in split.items()}
            for name, count in dataset.source_counts(own, epoch).items():
                totals[name] = totals.get(name, 0) + count
        return totals

    def can_restore_sample(self) -> bool:
        return all_can_restore(self.datasets)

    def restore_sample(self, restore_key: Any) -> Any:
        """The item with ``restore_key``, from the first dataset that knows the key."""
        return restore_from_any(self.datasets, restore_key, "ConcatDataset")

    def open_streams(self, streams: Sequence[int], resume: Resume) -> ConcatStreams:
        return ConcatStreams(self, streams, resume)

    def __len__(self) -> int:
        return rank_len(self)

    def __iter__(self) -> Iterator[Any]:
        from stoker.runtime.loader import Loader

        with Loader(self, in_process=True) as loader:
            yield from loader


class ConcatStreams:
    """A concatenation's streams in one process."""

    def __init__(self, concat: ConcatDataset, streams: Sequence[int], resume: Resume) -> None:
        saved = {s: concat.split(p) for s, p in resume.positions.items()}
        self.parts: list[OpenStreams] = []
        for d, dataset in enumerate(concat.datasets):
            held = {s: b[str(d)] for s, b in resume.buffers.items() if b.get(str(d))}
            positions = {s: parts[d] for s, (parts, _) in saved.items()}
            own = Resume(positions, held, t=resume.t, epoch=resume.epoch)
            self.parts.append(dataset.open_streams(streams, own))
        self.batches: dict[int, StreamBatches] = {}
        self.start: dict[int, Position] = {}
        for s in streams:
            current = saved[s][1] if s in saved else 0
            marks: list[Mark] = [(part.start[s], None) for part in self.parts]
            self.start[s] = _encode(marks, current)[0]
            self.batches[s] = self._run(s, current, marks)

    def _run(self, stream: int, current: int, marks: list[Mark]) -> StreamBatches:
        for d in range(current, len(self.parts)):
            for item, position, held in self.parts[d].batches[stream]:
                marks[d] = (position, held)
                yield (item, *_encode(marks, d))

    def take_skips(self) -> Skips | None:
        return take_skips(self.parts)

    def close(self) -> None:
        for part in self.parts:
            part.close()


def _encode(marks: list[Mark], current: int) -> tuple[Position, Buffers | None]:
    values = [v for position, _ in marks for v in position.to_list()]
    held = marks[current][1]
    return Position.from_list([*values, current]), ({str(current): held} if held else None)
