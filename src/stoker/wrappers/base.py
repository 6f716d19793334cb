"""The base of dataset wrappers: a recipe over an inner dataset that transforms each stream.

A wrapper (Energon's ``MapDataset``, ``BatchDataset``, ``LimitDataset``, ...) is a picklable
recipe over any inner :class:`~stoker.runtime.streams.Loadable` (a ``LoaderDataset``, a
``MixBatchDataset``, another wrapper). It runs in the dataloader workers over the same streams
(virtual workers) as its inner dataset: each worker opens the inner streams it owns and feeds
each to :meth:`Wrapper.transform`, which yields the wrapper's outputs, each with the inner
stream's *mark* (position and buffers) to resume from and a few ints of the wrapper's own.

A wrapped stream's position is the inner position followed by the wrapper's own ints
(``[*inner, *own]``); its buffers are ``{"inner": ..., "own": ...}``. So a saved state stays plain
data, and a restore re-opens the inner stream at the saved mark and the wrapper where it was.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.refs import Buffers, Position
from stoker.pipeline.skips import Skips
from stoker.plan import Topology
from stoker.runtime.streams import (
    Loadable,
    OpenStreams,
    Resume,
    StreamBatches,
    rank_len,
    take_skips,
)

#: Where an inner stream resumes: its position and what its stages buffer there.
Mark = tuple[Position, Buffers | None]
#: What a transform yields: output, inner mark after it, the wrapper's ints, its plain data.
Out = tuple[Any, Mark, list[int], Any]


@dataclass
class StreamContext:
    """One wrapped stream, as its transform sees it."""

    stream: int
    #: The loader's pass.
    epoch: int
    #: The inner stream's mark where it was opened (the start of the pass, or the saved mark).
    start: Mark
    #: The wrapper's own ints (saved, or :meth:`Wrapper.initial_own` for a fresh stream).
    own: list[int]
    #: The wrapper's own saved plain data (None for a fresh stream).
    held: Any
    #: This stream's index among the rank's streams, and their number.
    rank_index: int
    rank_streams: int
    #: Opens the inner stream again at a mark (None: its start) in another inner pass.
    reopen: Callable[[Mark | None, int], tuple[StreamBatches, Mark]]
    #: Where the wrapper's own error trackers count what they skip (sent with the batches).
    skips: Skips = field(default_factory=Skips)


def check_inner(dataset: Any, worker_config: WorkerConfig, owner: str) -> None:
    """A clear error unless ``dataset`` is loadable with ``worker_config``."""
    if not hasattr(dataset, "open_streams"):
        raise ConfigError(
            f"{owner} wraps a dataset stoker can load, got {type(dataset).__name__}.",
            hint="Wrap what get_train_dataset/get_val_dataset (or another wrapper) returned.",
        )
    if dataset.worker_config != worker_config:
        raise ConfigError(
            f"{owner} got worker_config={worker_config}, its inner dataset has "
            f"{dataset.worker_config}.",
            hint="Pass the same WorkerConfig to the dataset and to every wrapper around it.",
        )


class Wrapper:
    """A dataset made by transforming each stream of ``dataset``; subclasses set the transform.

    Subclasses override :meth:`transform` (and where they keep state, :meth:`own_size`,
    :meth:`describe`, :meth:`stream_len`).
    """

    def __init__(self, dataset: Loadable, *, worker_config: WorkerConfig) -> None:
        check_inner(dataset, worker_config, type(self).__name__)
        self.dataset = dataset
        self.worker_config = worker_config

    # --- what a wrapper specialises -------------------------------------------------------------

    def own_size(self) -> int:
        """How many ints of its own the wrapper adds to a stream position."""
        return 0

    def initial_own(self, start: Mark) -> list[int]:
        """The wrapper's ints for a stream that starts at ``start``."""
        return [0] * self.own_size()

    def resume_mark(self, own: list[int], held: Any, inner: Mark) -> Mark:
        """Where to open the inner stream to resume from a saved position (default: its mark)."""
        return inner

    def inner_epoch(self, own: list[int] | None, epoch: int) -> int:
        """The inner pass a stream at ``own`` (None: fresh) reads in the loader's pass."""
        return epoch

    def describe(self) -> dict[str, Any]:
        """The wrapper's settings a saved state is only valid for (JSON values)."""
        return {}

    def transform(self, ctx: StreamContext, items: StreamBatches) -> Iterator[Out]:
        """The wrapper's outputs from one inner stream's items."""
        raise NotImplementedError

    def stream_len(self, stream: int) -> int:
        """Outputs per pass of one stream (Energon's ``len`` semantics: 1:1 by default)."""
        return self.dataset.stream_len(stream)

    def can_restore_sample(self) -> bool:
        """Whether items can be rebuilt from their ``__restore_key__`` (pass-through wrappers:
        when the inner dataset's can)."""
        check = getattr(self.dataset, "can_restore_sample", None)
        return bool(check()) if check is not None else False

    def restore_sample(self, restore_key: Any) -> Any:
        """The item with ``restore_key``, loaded again (pass-through: the inner dataset's)."""
        return self.dataset.restore_sample(restore_key)  # type: ignore[attr-defined]

    # --- the Loadable protocol ----------------------------------------------------------------

    @property
    def limit(self) -> int | None:
        return self.dataset.limit

    @property
    def virtual_epoch_length(self) -> int:
        return self.dataset.virtual_epoch_length

    def topology(self) -> Topology:
        return self.dataset.topology()

    def with_virtual_workers(self, virtual_workers: int) -> Wrapper | None:
        inner = self.dataset.with_virtual_workers(virtual_workers)
        if inner is None:
            return None
        wrapper = copy.copy(self)
        wrapper.dataset = inner
        return wrapper

    def fingerprint(self) -> dict[str, Any]:
        out = dict(self.dataset.fingerprint())
        out["wrappers"] = [*out.get("wrappers", []), {"type": type(self).__name__,
                                                      **self.describe()}]  # fmt: skip
        return out

    def position_size(self) -> int:
        return self.dataset.position_size() + self.own_size()

    def source_counts(self, positions: Mapping[int, Position], epoch: int) -> dict[str, int]:
        return self.dataset.source_counts(
            {s: self.split(p)[0] for s, p in positions.items()}, epoch
        )

    def open_streams(self, streams: Sequence[int], resume: Resume) -> WrappedStreams:
        return WrappedStreams(self, streams, resume)

    def __len__(self) -> int:
        return rank_len(self)

    def __iter__(self) -> Iterator[Any]:
        from stoker.runtime.loader import Loader

        with Loader(self, in_process=True) as loader:
            yield from loader

    # --- position layout ----------------------------------------------------------------------

    def split(self, position: Position) -> tuple[Position, list[int]]:
        """The inner position and the wrapper's ints of a wrapped stream's position."""
        n = self.own_size()
        if n == 0:
            return position, []
        values = position.to_list()
        return Position.from_list(values[:-n]), values[-n:]

    def join(self, inner: Position, own: Sequence[int]) -> Position:
        if not own:
            return inner
        return Position.from_list([*inner.to_list(), *own])

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v!r}" for k, v in self.describe().items())
        return f"{type(self).__name__}({settings}{', ' if settings else ''}{self.dataset!r})"


def join_held(inner: Buffers | None, own: Any) -> Buffers | None:
    held = {k: v for k, v in (("inner", inner), ("own", own)) if v}
    return held or None


class WrappedStreams:
    """A wrapper's streams in one process: the inner streams there, each transformed."""

    def __init__(self, wrapper: Wrapper, streams: Sequence[int], resume: Resume) -> None:
        self.wrapper = wrapper
        self.resume = resume
        self.opened: list[OpenStreams] = []
        self._single: dict[int, OpenStreams] = {}
        #: What the wrapper's functions skipped since the last :meth:`take_skips`.
        self.skips = Skips()
        rank = wrapper.topology().rank_streams().tolist()
        #: Per resumed stream: the wrapper's ints and data, and the inner mark.
        saved: dict[int, tuple[list[int], Any, Mark]] = {}
        for s, position in resume.positions.items():
            inner_position, own = wrapper.split(position)
            buffers = resume.buffers.get(s) or {}
            saved[s] = (own, buffers.get("own"), (inner_position, buffers.get("inner")))
        groups: dict[int, list[int]] = {}
        for s in streams:
            epoch = wrapper.inner_epoch(saved[s][0] if s in saved else None, resume.epoch)
            groups.setdefault(epoch, []).append(s)
        self.batches: dict[int, StreamBatches] = {}
        self.start: dict[int, Position] = {}
        for epoch, group in groups.items():
            marks = {s: wrapper.resume_mark(*saved[s]) for s in group if s in saved}
            opened = wrapper.dataset.open_streams(group, _resume_at(marks, epoch, resume.t))
            self.opened.append(opened)
            for s in group:
                start: Mark = (opened.start[s], marks[s][1] if s in marks else None)
                own, held = saved[s][:2] if s in saved else (wrapper.initial_own(start), None)
                ctx = StreamContext(s, resume.epoch, start, own, held, rank.index(s), len(rank),
                                    self._reopener(s), self.skips)  # fmt: skip
                self.start[s] = resume.positions.get(s) or wrapper.join(start[0], ctx.own)
                self.batches[s] = self._encoded(ctx, opened.batches[s])

    def _reopener(self, stream: int) -> Callable[[Mark | None, int], tuple[StreamBatches, Mark]]:
        def reopen(mark: Mark | None, epoch: int) -> tuple[StreamBatches, Mark]:
            previous = self._single.pop(stream, None)
            if previous is not None:
                previous.close()
            opened = self.wrapper.dataset.open_streams(
                [stream], _resume_at({stream: mark} if mark else {}, epoch, self.resume.t)
            )
            self._single[stream] = opened
            return opened.batches[stream], (opened.start[stream], mark[1] if mark else None)

        return reopen

    def _encoded(
        self, ctx: StreamContext, items: StreamBatches
    ) -> Iterator[tuple[Any, Position, Buffers | None]]:
        for output, (inner, inner_held), own, held in self.wrapper.transform(ctx, items):
            yield output, self.wrapper.join(inner, own), join_held(inner_held, held)

    def take_skips(self) -> Skips | None:
        out = take_skips([*self.opened, *self._single.values()]) or Skips()
        own = self.skips.take()
        if own:
            out.merge(own)
        return out or None

    def close(self) -> None:
        for opened in [*self.opened, *self._single.values()]:
            opened.close()


def _resume_at(marks: Mapping[int, Mark], epoch: int, t: int) -> Resume:
    return Resume(
        positions={s: m[0] for s, m in marks.items()},
        buffers={s: m[1] for s, m in marks.items() if m[1]},
        t=t,
        epoch=epoch,
    )


def all_can_restore(datasets: Sequence[Any]) -> bool:
    """Whether every one of ``datasets`` can restore its items from their keys."""
    checks = [getattr(d, "can_restore_sample", None) for d in datasets]
    return all(check is not None and check() for check in checks)


def restore_from_any(datasets: Sequence[Any], restore_key: Any, owner: str) -> Any:
    """The item with ``restore_key`` from the first of ``datasets`` that knows the key."""
    problems = []
    for dataset in datasets:
        try:
            return dataset.restore_sample(restore_key)
        except ConfigError as e:
            problems.append(e.message)
    raise ConfigError(f"no dataset of the {owner} restores {restore_key!r}: {problems}")


#: Energon's name for the base of dataset wrappers.
BaseWrapperDataset = Wrapper
