"""The loader the training loop holds: worker processes, canonical batch order, state.

Workers produce the batches of the streams they own, each tagged with its stream and the stream's
position after it. The main process takes them in the canonical order (micro-batch ``t`` of this
rank comes from local stream ``t mod L`` and worker ``t mod N``), whatever order they arrive in,
and remembers each stream's position: that is the whole loader state.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from stoker.pipeline.build import SampleBuilder
from stoker.pipeline.stream import Position, SampleStream, batches
from stoker.task import ErrorTracker

if TYPE_CHECKING:
    from stoker.dataset import LoaderDataset

#: Item kinds sent from workers to the main process.
BATCH, END = 0, 1
Item = tuple[int, int, int, Any, "list[int] | None"]  # worker, stream, kind, batch, position


def worker_items(
    dataset: LoaderDataset, worker: int, starts: dict[int, Position], exhausted: set[int]
) -> Iterator[Item]:
    """The batches of one worker's streams, round-robin over its streams (canonical order)."""
    streams = [s for s in dataset.topology().worker_streams(worker).tolist() if s not in exhausted]
    reader = dataset.source.reader()
    builder = SampleBuilder(dataset.source, dataset.task_encoder.decoder)
    tracker = ErrorTracker(dataset.error_policy)
    iterators = {}
    for s in streams:
        spec = dataset.stream_spec(s)
        samples = SampleStream(spec, reader, builder, tracker, starts.get(s, Position()))
        iterators[s] = batches(spec, iter(samples))
    try:
        while streams:
            for s in list(streams):
                try:
                    batch, position = next(iterators[s])
                except StopIteration:
                    streams.remove(s)
                    yield worker, s, END, None, None
                else:
                    yield worker, s, BATCH, batch, position.to_list()
    finally:
        reader.close()


class _WorkerDataset:
    """What each torch dataloader worker iterates (a torch ``IterableDataset``)."""

    def __init__(
        self, dataset: LoaderDataset, starts: dict[int, Position], exhausted: set[int]
    ) -> None:
        self.dataset, self.starts, self.exhausted = dataset, starts, exhausted

    def __iter__(self) -> Iterator[Item]:
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        return worker_items(self.dataset, worker, self.starts, self.exhausted)


class _Live:
    """Running producers (worker processes or in-process generators) and per-worker queues."""

    def __init__(self, loader: Loader) -> None:
        dataset = loader.dataset
        starts, exhausted = dict(loader.positions), set(loader.exhausted)
        workers = dataset.worker_config.num_workers
        self.queues: dict[int, collections.deque[Item]] = collections.defaultdict(collections.deque)
        self._torch_iter: Any = None
        if workers == 0 or loader.in_process:
            self._producers = [
                worker_items(dataset, w, starts, exhausted) for w in range(max(workers, 1))
            ]
            return
        import torch.utils.data

        class _Iterable(_WorkerDataset, torch.utils.data.IterableDataset[Item]):
            pass

        self._torch_iter = iter(
            torch.utils.data.DataLoader(
                _Iterable(dataset, starts, exhausted),
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
            _, got, kind, batch, position = self._live.next_from(k % workers)
            if got != stream:
                raise RuntimeError(f"internal: expected stream {stream}, worker sent {got}")
            self.t += 1
            if kind == END:
                self.exhausted.add(stream)
                continue
            assert position is not None
            self.positions[stream] = Position.from_list(position)
            self.yielded += 1
            self._batch = batch
            return True
        return False

    def _next_pass(self) -> None:
        self.epoch += 1
        self.positions = {s: Position(epoch=self.epoch) for s in self.streams}
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
        samples = dataset.plan(stream).epoch_length(0)
        size = dataset.batch_size or 1
        total += samples // size if dataset.batch_drop_last else -(-samples // size)
    return min(total, dataset.limit) if dataset.limit is not None else total
