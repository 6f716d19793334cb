"""The loader the training loop holds: worker processes, canonical batch order, state.

Workers produce the batches of the streams they own, each tagged with its stream and the stream's
position after it. The main process takes them in the canonical order (micro-batch ``t`` of this
rank comes from local stream ``t mod L`` and worker ``t mod N``), whatever order they arrive in,
and remembers each stream's position: that is the whole loader state.
"""

from __future__ import annotations

import collections
import pickle
import traceback
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch.utils.data

from stoker import state as state_module
from stoker.errors import ConfigError
from stoker.pipeline.build import SampleBuilder
from stoker.pipeline.refs import Buffers
from stoker.pipeline.stream import Position, SampleStream, SourceIO, batches
from stoker.task import ErrorTracker

if TYPE_CHECKING:
    from stoker.dataset import LoaderDataset

#: Item kinds sent from workers to the main process.
BATCH, END, ERROR = 0, 1, 2
#: worker, stream, kind, batch, position, what the stream's packing/grouping stages hold
Item = tuple[int, int, int, Any, "list[int] | None", "Buffers | None"]


@dataclass(frozen=True)
class Resume:
    """Where the workers start: stream positions (+ buffered references), finished streams,
    micro-batch and pass."""

    positions: dict[int, Position] = field(default_factory=dict)
    buffers: dict[int, Buffers] = field(default_factory=dict)
    exhausted: frozenset[int] = frozenset()
    t: int = 0
    epoch: int = 0


def worker_items(dataset: LoaderDataset, worker: int, resume: Resume) -> Iterator[Item]:
    """The batches of one worker's streams, round-robin over its streams (canonical order).

    The round starts at the stream the main process asks this worker for first, at or after its
    micro-batch counter ``resume.t`` (not necessarily at a round boundary after a restore).
    """
    streams = _rotated_streams(dataset, worker, set(resume.exhausted), resume.t)
    decoder = dataset.task_encoder.decoder
    io = [
        SourceIO(s.reader(), SampleBuilder(s, decoder, dataset.task_encoder))
        for s in dataset.sources
    ]
    tracker = ErrorTracker(dataset.error_policy)
    iterators = {}
    for s in streams:
        spec = dataset.stream_spec(s)
        start = resume.positions.get(s)
        samples = SampleStream(spec, io, tracker, start, resume.epoch)
        iterators[s] = batches(spec, samples, resume.buffers.get(s))
    try:
        while streams:
            for s in list(streams):
                try:
                    batch, position, held = next(iterators[s])
                except StopIteration:
                    streams.remove(s)
                    yield worker, s, END, None, None, None
                except Exception as e:  # sent as data: torch's re-raise would lose its type
                    yield worker, s, ERROR, _portable(e), None, None
                    return
                else:
                    yield worker, s, BATCH, batch, position.to_list(), held
    finally:
        for source_io in io:
            source_io.reader.close()


def _portable(error: Exception) -> Exception:
    """The error itself if it survives pickling, else a RuntimeError with its text and type."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        detail = "".join(traceback.format_exception(error))
        return RuntimeError(f"{type(error).__name__} in a dataloader worker: {error}\n{detail}")
    return error


def _rotated_streams(dataset: LoaderDataset, worker: int, exhausted: set[int], t: int) -> list[int]:
    topology = dataset.topology()
    own = [s for s in topology.worker_streams(worker).tolist() if s not in exhausted]
    order = topology.rank_streams().tolist()
    for step in range(t, t + len(order)):
        stream = order[step % len(order)]
        if stream in own:
            i = own.index(stream)
            return own[i:] + own[:i]
    return own


class _WorkerDataset(torch.utils.data.IterableDataset[Item]):
    """What each torch dataloader worker iterates (picklable, for spawned workers too)."""

    def __init__(self, dataset: LoaderDataset, resume: Resume) -> None:
        super().__init__()
        self.dataset, self.resume = dataset, resume

    def __iter__(self) -> Iterator[Item]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        return worker_items(self.dataset, worker, self.resume)


class _Live:
    """Running producers (worker processes or in-process generators) and per-worker queues."""

    def __init__(self, loader: Loader) -> None:
        dataset = loader.dataset
        resume = Resume(
            dict(loader.positions),
            dict(loader.buffers),
            frozenset(loader.exhausted),
            loader.t,
            loader.epoch,
        )
        workers = dataset.worker_config.num_workers
        self.queues: dict[int, collections.deque[Item]] = collections.defaultdict(collections.deque)
        self._torch_iter: Any = None
        if workers == 0 or loader.in_process:
            self._producers = [worker_items(dataset, w, resume) for w in range(max(workers, 1))]
            return
        with warnings.catch_warnings():
            # torch warns when workers outnumber cores; the user chose num_workers knowingly.
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            self._torch_iter = iter(
                torch.utils.data.DataLoader(
                    _WorkerDataset(dataset, resume),
                    batch_size=None,
                    num_workers=workers,
                    prefetch_factor=loader.prefetch_factor,
                    pin_memory=loader.pin_memory,
                    timeout=loader.timeout,
                    in_order=False,
                )
            )

    def next_from(self, worker: int) -> Item:
        queue = self.queues[worker]
        while not queue:
            if self._torch_iter is None:
                return next(self._producers[worker])
            item: Item = next(self._torch_iter)
            self.queues[item[0]].append(item)
        return queue.popleft()

    def close(self) -> None:
        if self._torch_iter is not None:
            shutdown = getattr(self._torch_iter, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            self._torch_iter = None
        for producer in getattr(self, "_producers", []):
            producer.close()


class Loader:
    """Iterates a :class:`LoaderDataset` in canonical order and knows its position.

    Use :func:`stoker.get_loader` / :func:`stoker.get_savable_loader` to make one.
    """

    def __init__(
        self,
        dataset: LoaderDataset,
        *,
        prefetch_factor: int = 2,
        pin_memory: bool = False,
        timeout: float = 0.0,
        in_process: bool = False,
    ) -> None:
        self.dataset = dataset
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.in_process = in_process
        self.streams: list[int] = dataset.topology().rank_streams().tolist()
        self.positions: dict[int, Position] = {}
        #: What each stream's packing/grouping stages held after its last batch (if anything).
        self.buffers: dict[int, Buffers] = {}
        self.exhausted: set[int] = set()
        self.t = 0
        self.yielded = 0
        self.epoch = 0
        self._finished = False
        self._live: _Live | None = None

    def __iter__(self) -> Iterator[Any]:
        if self._finished:
            self._next_pass()
        budget = self.dataset.virtual_epoch_length or None
        count = 0
        while budget is None or count < budget:
            if not self._advance():
                self._finished = True
                self._stop()
                return
            count += 1
            yield self._batch

    def __len__(self) -> int:
        return batches_per_pass(self.dataset)

    def _advance(self) -> bool:
        limit = self.dataset.limit
        workers = max(self.dataset.worker_config.num_workers, 1)
        while len(self.exhausted) < len(self.streams):
            if limit is not None and self.yielded >= limit:
                return False
            k = self.t % len(self.streams)
            stream = self.streams[k]
            if stream in self.exhausted:
                self.t += 1
                continue
            if self._live is None:
                self._live = _Live(self)
            _, got, kind, batch, position, held = self._live.next_from(k % workers)
            if got != stream:
                raise RuntimeError(f"internal: expected stream {stream}, worker sent {got}")
            if kind == ERROR:
                self._stop()
                raise batch
            self.t += 1
            if kind == END:
                self.exhausted.add(stream)
                continue
            assert position is not None
            self.positions[stream] = Position.from_list(position)
            if held:
                self.buffers[stream] = held
            else:
                self.buffers.pop(stream, None)
            self.yielded += 1
            self._batch = batch
            return True
        return False

    def _next_pass(self) -> None:
        self.epoch += 1
        self.positions = {}  # every stream starts at the new pass (epoch)
        self.buffers = {}
        self.exhausted.clear()
        self.t = self.yielded = 0
        self._finished = False

    def _stop(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    def close(self) -> None:
        """Stop the worker processes (also done when the loader is garbage-collected)."""
        self._stop()

    def samples_per_dataset(self) -> dict[str, int]:
        """References each data source has contributed so far on this rank: the realised blend.

        Counted from the positions of the batches handed out (samples a task encoder skipped or
        expanded count as one reference each).

        Example:
            >>> loader.samples_per_dataset()  # doctest: +SKIP
            {'/data/coco': 10000, '/data/coyo': 4000}
        """
        names = [source.path for source in self.dataset.sources]
        totals = dict.fromkeys(names, 0)
        for stream, position in self.positions.items():
            schedule = self.dataset.schedule(stream)
            for name, count, first in zip(names, position.counts, schedule.start(0), strict=True):
                totals[name] += count - first
            if position.skip:  # the reference in progress has started to contribute
                counts = list(position.counts)
                pending = schedule.next_block(counts, schedule.end(counts, self.epoch), 1)
                totals[names[int(pending[0])]] += 1
        return totals

    # --- state -----------------------------------------------------------------------------

    def save_state_rank(self) -> dict[str, Any]:
        """This rank's position after the last batch handed out: plain data, a few KB.

        Costs no round trip to the workers: every batch carried its stream's position.
        """
        return state_module.make_state(
            fingerprint=self.dataset.fingerprint(),
            topology=self.dataset.topology(),
            epoch=self.epoch,
            t=self.t,
            yielded=self.yielded,
            finished=self._finished,
            exhausted=sorted(self.exhausted),
            streams={s: p.to_list() for s, p in self.positions.items()},
            buffers=self.buffers,
        )

    def restore_state_rank(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (saved by this rank, same world size; workers may differ)."""
        state = state_module.check_state(state)
        state_module.check_fingerprint(state, self.dataset.fingerprint())
        saved, current = state["topology"], self.dataset.topology()
        if (saved["world_size"], saved["rank"]) != (current.world_size, current.rank):
            raise ConfigError(
                f"the state is rank {saved['rank']} of {saved['world_size']}, this loader is rank "
                f"{current.rank} of {current.world_size}.",
                hint="To resume on another number of ranks, pass every rank's state to "
                "restore_state_global().",
            )
        self._apply(state_module.for_rank(state_module.merge_one(state), current))

    def save_state_global(self, global_dst_rank: int = 0) -> list[dict[str, Any]] | None:
        """Gather every rank's state on ``global_dst_rank`` (None on the other ranks)."""
        import torch.distributed as dist

        state = self.save_state_rank()
        if not (dist.is_available() and dist.is_initialized()):
            return [state]
        group = self.dataset.worker_config.data_parallel_group
        gathered: list[Any] | None = None
        if dist.get_rank() == global_dst_rank:
            gathered = [None] * dist.get_world_size(group)
        dist.gather_object(state, gathered, dst=global_dst_rank, group=group)
        return gathered

    def restore_state_global(
        self, states: list[dict[str, Any]] | None, *, src_rank: int | None = None
    ) -> None:
        """Continue from the states of all ranks, on this or another topology.

        Each rank passes the full list, or only ``src_rank`` does and it is broadcast. Without
        ``torch.distributed``, the full list restores this rank's share without communication.
        """
        if src_rank is not None:
            import torch.distributed as dist

            box = [states]
            dist.broadcast_object_list(
                box, src=src_rank, group=self.dataset.worker_config.data_parallel_group
            )
            states = box[0]
        if states is None:
            raise ConfigError("restore_state_global needs the states (or src_rank).")
        merged = state_module.merge(states)
        state_module.check_fingerprint(merged, self.dataset.fingerprint())
        self._apply(state_module.for_rank(merged, self.dataset.topology()))

    def state_dict(self) -> dict[str, Any]:
        """Same as :meth:`save_state_rank` (Lightning / torchdata style)."""
        return self.save_state_rank()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Same as :meth:`restore_state_rank`."""
        self.restore_state_rank(state)

    def _apply(self, state: dict[str, Any]) -> None:
        self._stop()
        self.positions = {int(s): Position.from_list(p) for s, p in state["streams"].items()}
        self.buffers = {int(s): b for s, b in state.get("buffers", {}).items()}
        self.exhausted = set(state["exhausted"])
        self.t, self.yielded, self.epoch = state["t"], state["yielded"], state["epoch"]
        self._finished = state["finished"]

    def __enter__(self) -> Loader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        self._stop()


def batches_per_pass(dataset: LoaderDataset) -> int:
    """Batches this rank yields per pass: exact for 1:1 encoders without skipped samples."""
    if dataset.virtual_epoch_length:
        return dataset.virtual_epoch_length
    total = 0
    for stream in dataset.topology().rank_streams().tolist():
        schedule = dataset.schedule(stream)
        start = schedule.start(0)
        end = schedule.end(start, 0)
        if end is None:  # endless blend: count one epoch of every source
            lengths = zip(schedule.plans, schedule.lengths, strict=True)
            samples = sum(plan.epoch_length(0) for plan, n in lengths if n)
        else:
            samples = sum(e - s for s, e in zip(start, end, strict=True))
        size = dataset.batch_size or 1
        total += samples // size if dataset.batch_drop_last else -(-samples // size)
    return min(total, dataset.limit) if dataset.limit is not None else total
