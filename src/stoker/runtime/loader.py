"""The loader the training loop holds: worker processes, canonical batch order, state.

Workers produce the batches of the streams they own, each tagged with its stream and the stream's
position after it. The main process takes them in the canonical order (micro-batch ``t`` of this
rank comes from local stream ``t mod L`` and worker ``t mod N``), whatever order they arrive in,
and remembers each stream's position: that is the whole loader state.
"""

from __future__ import annotations

import collections
import multiprocessing
import pickle
import traceback
import warnings
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import torch.utils.data
from torch.utils.data import _utils

from stoker.model.cache_pool import CachePool, use_cache_pool
from stoker.model.samples import pin_memory
from stoker.pipeline.refs import Buffers, Position
from stoker.pipeline.transport import Exported, MainTransport, WorkerTransport, activate
from stoker.runtime.held_wire import Receiver, Sender
from stoker.runtime.loader_state import LoaderState
from stoker.runtime.streams import Loadable, Resume

#: Item kinds sent from workers to the main process.
BATCH, END, ERROR = 0, 1, 2
#: worker, stream, kind, batch, position, what the stream's packing/grouping stages hold
Item = tuple[int, int, int, Any, "list[int] | None", "Buffers | None"]


def worker_items(dataset: Loadable, worker: int, resume: Resume) -> Iterator[Item]:
    """The batches of one worker's streams, round-robin over its streams (canonical order).

    The round starts at the stream the main process asks this worker for first, at or after its
    micro-batch counter ``resume.t`` (not necessarily at a round boundary after a restore).
    """
    streams = _rotated_streams(dataset, worker, set(resume.exhausted), resume.t)
    opened = dataset.open_streams(streams, resume)
    try:
        while streams:
            for s in list(streams):
                try:
                    batch, position, held = next(opened.batches[s])
                except StopIteration:
                    streams.remove(s)
                    yield worker, s, END, None, None, None
                except Exception as e:  # sent as data: torch's re-raise would lose its type
                    yield worker, s, ERROR, _portable(e), None, None
                    return
                else:
                    yield worker, s, BATCH, batch, position.to_list(), held
    finally:
        opened.close()


def _portable(error: Exception) -> Exception:
    """The error itself if it survives pickling, else a RuntimeError with its text and type."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        detail = "".join(traceback.format_exception(error))
        return RuntimeError(f"{type(error).__name__} in a dataloader worker: {error}\n{detail}")
    return error


def _rotated_streams(dataset: Loadable, worker: int, exhausted: set[int], t: int) -> list[int]:
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

    def __init__(
        self,
        dataset: Loadable,
        resume: Resume,
        releases: list[Any],
        cache_pool: CachePool | None = None,
    ) -> None:
        super().__init__()
        self.dataset, self.resume, self.releases = dataset, resume, releases
        self.cache_pool = cache_pool

    def __iter__(self) -> Iterator[Item]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        transport = WorkerTransport(self.releases[worker])
        activate(transport)  # batches are built in the worker's reused shared-memory slots
        use_cache_pool(self.cache_pool)  # what cookers with need_cache get, in this worker
        sender = Sender()
        try:
            for item in worker_items(self.dataset, worker, self.resume):
                if item[2] == BATCH:
                    held = sender.compact(item[1], item[5])  # what changed since the last batch
                    item = (*item[:3], transport.export(item[3]), item[4], held)
                yield item
        finally:
            activate(None)


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
        self._transport: MainTransport | None = None
        self._receiver = Receiver()
        self._pin = loader.pin_memory and torch.cuda.is_available()  # asked once, not per batch
        if workers == 0 or loader.in_process:
            use_cache_pool(loader.cache_pool)
            self._producers = [worker_items(dataset, w, resume) for w in range(max(workers, 1))]
            return
        self._transport = MainTransport(multiprocessing.get_context(), workers)
        with warnings.catch_warnings():
            # torch warns when workers outnumber cores; the user chose num_workers knowingly.
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            self._torch_iter = iter(
                torch.utils.data.DataLoader(
                    _WorkerDataset(dataset, resume, self._transport.queues, loader.cache_pool),
                    batch_size=None,
                    num_workers=workers,
                    prefetch_factor=loader.prefetch_factor,
                    timeout=loader.timeout,
                    in_order=False,
                )
            )

    def next_from(self, worker: int) -> Item:
        queue = self.queues[worker]
        while not queue:
            if self._torch_iter is None:
                return next(self._producers[worker])
            item: Item = self._received(next(self._torch_iter))
            self.queues[item[0]].append(item)
        return queue.popleft()

    def _received(self, item: Item) -> Item:
        """The item with its batch rebuilt, at once: the batch's file descriptors are served by
        its worker, which may exit soon after (the item can wait here for its turn)."""
        if item[2] == BATCH:  # a worker's items arrive in its streams' order
            item = (*item[:5], self._receiver.expand(item[1], item[5]))
        if isinstance(item[3], Exported) and self._transport is not None:
            batch = self._transport.load(item[0], item[3])
            if self._pin:
                batch = pin_memory(batch)
            item = (*item[:3], batch, *item[4:])
        return item

    def close(self, *, wait: bool = True) -> None:
        """Stop the workers: asked to finish, or (``wait=False``) ended at once."""
        if self._torch_iter is not None:
            if not wait:
                _end_workers(self._torch_iter)
            shutdown = getattr(self._torch_iter, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            self._torch_iter = None
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        for producer in getattr(self, "_producers", []):
            producer.close()


def _end_workers(torch_iter: Any) -> None:
    """Terminate a torch dataloader iterator's workers (unregistered first: torch's SIGCHLD
    handler would report them as failed)."""
    if _utils.python_exit_status is not False:  # exiting: torch's own exit handler stops them
        return
    if getattr(torch_iter, "_worker_pids_set", False):
        _utils.signal_handling._remove_worker_pids(id(torch_iter))  # type: ignore[attr-defined]
        torch_iter._worker_pids_set = False
    for worker in getattr(torch_iter, "_workers", []):
        if worker.is_alive():
            worker.terminate()


class Loader(LoaderState):
    """Iterates a dataset in canonical order and knows its position (its state: see
    :class:`~stoker.runtime.loader_state.LoaderState`).

    Use :func:`stoker.get_loader` / :func:`stoker.get_savable_loader` to make one.
    """

    def __init__(
        self,
        dataset: Loadable,
        *,
        prefetch_factor: int = 2,
        pin_memory: bool = False,
        timeout: float = 0.0,
        in_process: bool = False,
        cache_pool: CachePool | None = None,
    ) -> None:
        self.dataset = dataset
        #: Energon's cache pool for cookers that ask for ``cache=`` (None: read directly).
        self.cache_pool = cache_pool
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.in_process = in_process
        self.streams: list[int] = dataset.topology().rank_streams().tolist()
        self.positions: dict[int, Position] = {}
        #: What each stream's packing/grouping stages held after its last batch (if anything).
        self.buffers: dict[int, Buffers] = {}
        self.passed: dict[int, dict[str, int]] = {}
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
        return len(self.dataset)

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
        self._end_pass()
        self.epoch += 1
        self.positions = {}  # every stream starts at the new pass (epoch)
        self.buffers = {}
        self.exhausted.clear()
        self.t = self.yielded = 0
        self._finished = False

    def _stop(self, *, wait: bool = True) -> None:
        if self._live is not None:
            self._live.close(wait=wait)
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
        # Collected in a reference cycle (a loop left by an exception), the workers' queues may
        # be finalized already, so asking them to stop would wait out torch's 5 s timeout.
        self._stop(wait=False)
