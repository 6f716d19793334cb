"""The loader the training loop holds: worker processes, canonical batch order, state.

Workers produce the batches of the streams they own, each tagged with its stream and the stream's
position after it. The main process takes them in the canonical order (micro-batch ``t`` of this
rank comes from local stream ``t mod L`` and worker ``t mod N``), whatever order they arrive in,
and remembers each stream's position: that is the whole loader state.
"""

from __future__ import annotations

import collections
import functools
import gc
import multiprocessing
import multiprocessing.util
import warnings
import weakref
from collections.abc import Iterator
from time import perf_counter
from types import TracebackType
from typing import Any

import torch.utils.data

from stoker.errors import ConfigError, StokerError
from stoker.model.batch_wire import pack as pack_batch
from stoker.model.cache_pool import CachePool, use_cache_pool
from stoker.model.samples import pin_memory
from stoker.pipeline.refs import Buffers, Position, position
from stoker.pipeline.skips import STORAGE, STORAGE_WINDOW, Skips, check_storage_share
from stoker.pipeline.slot_pool import SlotPool
from stoker.pipeline.stage_clock import CLOCK, TRANSPORT
from stoker.pipeline.transport import Exported, MainTransport, WorkerTransport
from stoker.pipeline.transport import activate as use_transport
from stoker.runtime.bundle import RING_SHARE, Bundle, Bundler
from stoker.runtime.debug_log import DebugLog, YieldLog
from stoker.runtime.end_sync import EndSync
from stoker.runtime.envelope import BATCH, END, ERROR, Envelope
from stoker.runtime.float_batches import floats_travel_as_uint8
from stoker.runtime.gpu_batches import gpu_image_hook
from stoker.runtime.held_wire import Receiver, Sender
from stoker.runtime.loader_state import LoaderState
from stoker.runtime.loader_stats import LoaderMeasures
from stoker.runtime.pin_thread import PinThread
from stoker.runtime.stats import StatsCollector
from stoker.runtime.streams import Loadable, Resume
from stoker.runtime.worker_errors import WorkerFailure
from stoker.runtime.worker_meter import Meter
from stoker.runtime.worker_procs import (
    WORKER_GC_THRESHOLD,
    WorkerProcesses,
    tune_collector,
    unshare_done_event,
)
from stoker.runtime.worker_threads import ThreadWorkers
from stoker.runtime.worker_types import MAIN, THREAD, worker_type_name
from stoker.runtime.worker_watch import (
    POLL,
    WatchSettings,
    WorkerReplaced,
    WorkerWatch,
    forget_worker_pids,
    late_items,
)
from stoker.storage.options import LoaderOptions, activate
from stoker.storage.s3_client import spare_for_children


def worker_items(
    dataset: Loadable, worker: int, resume: Resume, meter: Meter | None = None
) -> Iterator[Envelope]:
    """The batches of one worker's streams, round-robin over its streams (canonical order).

    The round starts at the stream the main process asks this worker for first, at or after its
    micro-batch counter ``resume.t`` (not necessarily at a round boundary after a restore).
    Every item carries what the worker skipped since the one before, and now and then what
    ``meter`` measured; a failure (opening the streams too) is sent as an ERROR item, for the
    stream asked for next, and ends the worker.
    """
    meter = meter or Meter(enabled=False)
    streams = _rotated_streams(dataset, worker, set(resume.exhausted), resume.t)
    if not streams:
        return
    try:
        opened = dataset.open_streams(streams, resume)
    except Exception as e:  # sent as data: torch's re-raise would lose its type
        yield Envelope(ERROR, worker, streams[0], WorkerFailure.capture(e, worker))
        return
    in_worker = torch.utils.data.get_worker_info() is not None
    debug = DebugLog.of(dataset.worker_config, worker, resume.epoch, in_worker=in_worker)
    try:
        while streams:
            for s in list(streams):
                started = perf_counter()
                try:
                    batch, position, held = next(opened.batches[s])
                except StopIteration:
                    CLOCK.busy += perf_counter() - started
                    streams.remove(s)
                    stats = meter.due(final=not streams)
                    yield Envelope(END, worker, s, skips=opened.take_skips(), stats=stats)
                except Exception as e:
                    failure = WorkerFailure.capture(e, worker)
                    yield Envelope(ERROR, worker, s, failure, skips=opened.take_skips())
                    return
                else:
                    CLOCK.busy += perf_counter() - started
                    if debug is not None:
                        debug.batch(s, batch)
                    yield Envelope(
                        BATCH,
                        worker,
                        s,
                        batch,
                        position=position.to_list(),
                        held=held,
                        skips=opened.take_skips(),
                        samples=CLOCK.take_samples(),
                        stats=meter.due(),
                    )
    finally:
        opened.close()
        if debug is not None:
            debug.close()


def _metered_items(
    stats: bool, dataset: Loadable, worker: int, resume: Resume
) -> Iterator[Envelope]:
    """:func:`worker_items` with a meter of its own (a thread worker's)."""
    return worker_items(dataset, worker, resume, Meter(enabled=stats))


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


def _worker_died(error: BaseException) -> StokerError:
    """A worker ended while the main process read a batch from it (killed, out of memory)."""
    return StokerError(
        f"a dataloader worker exited unexpectedly while sending a batch ({error}).",
        hint="A worker was killed (out of memory? see `dmesg`) or crashed; restart from the "
        "last saved loader state.",
    )


class _WorkerDataset(torch.utils.data.IterableDataset[Bundle[Envelope]]):
    """What each torch dataloader worker iterates (picklable, for spawned workers too)."""

    def __init__(
        self,
        dataset: Loadable,
        resume: Resume,
        releases: list[Any],
        options: LoaderOptions,
        cache_pool: CachePool | None = None,
        prefetch_factor: int = 2,
        slot_pool: SlotPool | None = None,
        watch: WorkerWatch | None = None,
    ) -> None:
        super().__init__()
        self.watch = watch  # the table a stuck or dead worker is noticed by
        self.dataset, self.resume, self.releases = dataset, resume, releases
        self.options, self.cache_pool = options, cache_pool
        self.prefetch_factor = prefetch_factor  # sizes the shared-memory slots
        self.slot_pool = slot_pool  # the workers' shared slots (forked workers only)

    def __iter__(self) -> Iterator[Bundle[Envelope]]:
        info = torch.utils.data.get_worker_info()
        worker = info.id if info is not None else 0
        if info is not None:
            tune_collector()
        activate(self.options)  # this worker's read-ahead, cache and retries: the loader's
        slots_mb, prefetch = self.options.batch_slots_mb, self.prefetch_factor
        transport = WorkerTransport(
            self.releases[worker],
            slots_mb,
            prefetch,
            floats_as_uint8=floats_travel_as_uint8(self.dataset),
            pool=self.slot_pool,
        )
        transport.worker, transport.reports_pool = worker, worker == 0  # pool slots counted once
        use_transport(transport)  # batches are built in the worker's reused shared-memory slots
        use_cache_pool(self.cache_pool)  # what cookers with need_cache get, in this worker
        sender = Sender()
        meter = Meter(enabled=self.options.stats, transport=transport)
        bundler: Bundler[Envelope] = Bundler()
        items = worker_items(self.dataset, worker, self.resume, meter)
        if self.watch is not None:
            self.watch.start_worker(worker)
            items = self.watch.timed(items, worker)
        try:
            for item in items:
                nbytes, ring_bytes, close = 0, 0, False
                if item.kind == BATCH:
                    nbytes, ring_bytes = self._export(item, transport, sender, worker)
                    close = transport.refers_to_slots  # its slots are not held back
                    if ring_bytes and bundler.max_ring_bytes is None:
                        bundler.max_ring_bytes = int(transport.ring.capacity * RING_SHARE)
                close = close or item.kind == ERROR
                due = bundler.add(item, nbytes, close=close, ring_bytes=ring_bytes)
                yield from due
                if due:
                    bundler.resumed()
                if item.kind == ERROR:
                    return
            rest = bundler.take()
            if rest is not None:
                yield rest
        finally:
            use_transport(None)

    @staticmethod
    def _export(
        item: Envelope, transport: WorkerTransport, sender: Sender, worker: int
    ) -> tuple[int, int]:
        """Pickle ``item``'s batch for the main process (in place); the bytes its message
        carries (none where the pickle went into the payload ring) and those in the ring. A
        batch that cannot be pickled turns the item into an ERROR."""
        CLOCK.start(TRANSPORT)
        started = perf_counter()
        try:
            item.held = sender.compact(item.stream, item.held)  # what changed
            exported = transport.export(pack_batch(item.batch))
            item.batch = exported
            span = exported.span
            return len(exported.payload), 0 if span is None else span[1]
        except Exception as e:  # a batch that cannot be pickled, say
            item.kind, item.batch = ERROR, WorkerFailure.capture(e, worker)
            return 0, 0
        finally:
            CLOCK.stop()
            CLOCK.busy += perf_counter() - started


def _with_options(items: Iterator[Envelope], options: LoaderOptions) -> Iterator[Envelope]:
    """``items`` of an in-process producer, each made under the loader's options (the
    process's own are back in force between batches), with young collections spaced as in a
    worker (:func:`_spaced_collections`)."""
    try:
        while True:
            previous = activate(options)
            thresholds = _spaced_collections()
            try:
                item = next(items, None)
            finally:
                activate(previous)
                if thresholds is not None and gc.get_threshold()[0] == WORKER_GC_THRESHOLD:
                    gc.set_threshold(*thresholds)  # (unless user code set its own meanwhile)
            if item is None:
                return
            yield item
    finally:
        items.close()  # type: ignore[attr-defined]


def _spaced_collections() -> tuple[int, ...] | None:
    """Young collections every :data:`WORKER_GC_THRESHOLD` allocations while this process
    makes a batch itself (``num_workers=0``), as a worker makes them; the thresholds to put
    back after (None: the process's own are as high already).

    A batch of small samples is thousands of objects that live until it is handed out: the
    default threshold (700) walks them several times per batch and moves them to older
    generations, whose collections then walk the whole process (measured: ~1.5 us of ~9 per
    JSONL sample). The process's own thresholds are back in force between batches, so its
    garbage cycles are collected as before, a batch's worth of allocations later at most.
    """
    thresholds = gc.get_threshold()
    if thresholds[0] >= WORKER_GC_THRESHOLD or thresholds[0] == 0:
        return None
    gc.set_threshold(WORKER_GC_THRESHOLD, *thresholds[1:])
    return thresholds


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
        self.queues: dict[int, collections.deque[Envelope]] = collections.defaultdict(
            collections.deque
        )
        self._torch_iter: Any = None
        self._transport: MainTransport | None = None
        self._receiver = Receiver()
        self._pin = loader.pin_memory and torch.cuda.is_available()  # asked once, not per batch
        self._pinner: PinThread[list[Envelope]] | None = None
        self._watch: WorkerWatch | None = None
        kind = loader.worker_type
        if workers and kind == THREAD and not loader.in_process:
            use_cache_pool(loader.cache_pool)
            self._producers: list[Any] = ThreadWorkers(
                dataset,
                resume,
                functools.partial(_metered_items, loader.options.stats),
                workers=workers,
                depth=loader.prefetch_factor,
                options=loader.options,
                pin=self._pin,
                timeout=loader.timeout,
            ).producers
            return
        if workers == 0 or loader.in_process or kind == MAIN:
            use_cache_pool(loader.cache_pool)
            self._producers = [
                _with_options(
                    worker_items(dataset, w, resume, Meter(enabled=loader.options.stats)),
                    loader.options,
                )
                for w in range(max(workers, 1))
            ]
            if loader.watch.timeout is not None:
                self._producers = [late_items(p, loader.watch) for p in self._producers]
            return
        # Workers inherit this process's temporary folder (removed when it exits) instead of
        # each making a pymp-* folder for its sockets, which a killed worker leaves behind.
        multiprocessing.util.get_temp_dir()
        context = multiprocessing.get_context(kind)  # None: the default start method
        if context.get_start_method() == "fork":
            spare_for_children()  # S3 clients the workers take rather than each making one
        self._transport = MainTransport(context, workers, _slot_pool(context, loader, workers))
        self._workers = WorkerProcesses()
        if loader.watch.timeout is not None:
            skip = frozenset(loader.stuck_samples)
            self._watch = WorkerWatch(context, workers, loader.watch, skip)
        self._timeout = loader.timeout
        with warnings.catch_warnings():
            # torch warns when workers outnumber cores; the user chose num_workers knowingly.
            warnings.filterwarnings("ignore", message="This DataLoader will create")
            torch_loader = torch.utils.data.DataLoader(
                _WorkerDataset(
                    dataset,
                    resume,
                    self._transport.queues,
                    loader.options,
                    loader.cache_pool,
                    loader.prefetch_factor,
                    self._transport.pool,
                    self._watch,
                ),
                batch_size=None,
                num_workers=workers,
                prefetch_factor=loader.prefetch_factor,
                timeout=loader.timeout if self._watch is None else POLL,
                in_order=False,
                multiprocessing_context=context,
            )
            self._torch_iter = self._workers.start(lambda: iter(torch_loader))
        self._processes = {p.pid: p for p in self._workers.processes}
        if self._watch is not None:
            self._watch.start_monitor()
        if self._watch is not None and loader.watch.on_worker_failure == "replace":
            forget_worker_pids(self._torch_iter)
        if self._pin:  # batches are received and pinned ahead, in order, on their own thread
            self._pinner = PinThread(self._receive, _pin_batch, depth=loader.prefetch_factor)

    def _receive(self) -> list[Envelope]:
        """The next bundle of items, watching the workers while none arrives."""
        if self._watch is None:
            return self._receive_next()
        return self._watch.receive(self._receive_next, self._processes, self._timeout)

    def _receive_next(self) -> list[Envelope]:
        """The next bundle of items from a worker, received (see :meth:`_received`)."""
        return [self._received(item) for item in next(self._torch_iter).items]

    def next_from(self, worker: int) -> Envelope:
        queue = self.queues[worker]
        if self._transport is not None:  # slots freed since the last batch go back first
            self._transport.flush()
        while not queue:
            if self._torch_iter is None:
                made: Envelope = next(self._producers[worker])
                return made
            try:
                items = self._pinner.get() if self._pinner else self._receive()
            except (ConnectionError, EOFError) as e:  # its batch's sender is gone
                raise _worker_died(e) from e
            if items:  # a bundle holds the items of one worker
                self.queues[items[0].worker].extend(items)
        item = queue.popleft()
        if self._transport is not None and not self._pin:
            if isinstance(item.batch, Exported):  # plain data, rebuilt when its turn comes
                item.batch = self._transport.load(item.worker, item.batch)
            self._transport.finish(item.batch)  # float batches sent as uint8
        return item

    def _received(self, item: Envelope) -> Envelope:
        """The item with its batch rebuilt at once if it refers to what its worker serves
        (file descriptors, slots: the worker may exit soon after, while the item waits here for
        its turn). A batch of plain data is rebuilt when it is handed out (:meth:`next_from`):
        its objects are not made long before they are used (see
        :mod:`stoker.pipeline.batch_pickler`)."""
        if item.kind == BATCH:  # a worker's items arrive in its streams' order
            item.held = self._receiver.expand(item.stream, item.held)
        batch = item.batch
        if isinstance(batch, Exported) and self._transport is not None:
            if batch.detached and not self._pin:
                return item
            item.batch = self._transport.load(item.worker, batch)
            if self._pin:  # pinned next, on this thread: floats sent as uint8 are scaled first
                self._transport.finish(item.batch)
        return item

    def close(self, *, wait: bool = True) -> None:
        """Stop the workers: asked to finish, or (``wait=False``) ended at once."""
        if self._pinner is not None:  # first: it may be reading from the workers
            self._pinner.close(timeout=10.0 if wait else 0.0)
            self._pinner = None
        if self._torch_iter is not None:
            if not wait:  # collected in a cycle: torch's queues may be gone (see worker_procs)
                self._workers.terminate()
                unshare_done_event(self._torch_iter)
            freed = weakref.ref(self._torch_iter)
            self._torch_iter = None  # torch's iterator stops its workers when it is freed
            if wait and freed() is not None:  # still held (by a traceback, say): end them here
                self._workers.terminate(join=1.0)
                unshare_done_event(freed())
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._watch is not None:
            self._watch.close()
        for producer in getattr(self, "_producers", []):
            producer.close()


def _slot_pool(context: Any, loader: Loader, workers: int) -> SlotPool | None:
    """The batch slots the workers share (see :mod:`stoker.pipeline.slot_pool`): made here
    before the workers fork, so every process maps them without sending anything. None where
    the workers are spawned (they would be sent) or the user fixed a slot budget per worker."""
    if context.get_start_method() != "fork" or loader.options.batch_slots_mb is not None:
        return None
    try:
        return SlotPool.for_loader(context, workers, loader.prefetch_factor)
    except OSError:  # no address space for it (strict overcommit): slots per worker
        return None


def _pin_batch(items: list[Envelope]) -> list[Envelope]:
    """``items`` with their batches copied to pinned memory (on the :class:`PinThread`)."""
    for item in items:
        if item.kind == BATCH:
            item.batch = pin_memory(item.batch)
    return items


class Loader(LoaderState, LoaderMeasures):
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
        options: LoaderOptions | None = None,
        sync_end: str | None = "auto",
        watch: WatchSettings | None = None,
        worker_type: object = None,
    ) -> None:
        self._live: _Live | None = None  # first: __del__ runs even if the checks below fail
        self.dataset = dataset
        #: Read-ahead, batch slots, cache and retries of the workers (None: from the
        #: environment, read now, in this process).
        self.options = LoaderOptions() if options is None else options
        if not isinstance(self.options, LoaderOptions):
            raise ConfigError(
                f"options={options!r} must be a stoker.LoaderOptions.",
                hint="E.g. options=LoaderOptions(prefetch_bytes=64 << 20).",
            )
        #: Energon's cache pool for cookers that ask for ``cache=`` (None: read directly).
        self.cache_pool = cache_pool
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.in_process = in_process
        #: Where the workers run: see :mod:`stoker.runtime.worker_types` (None: processes).
        self.worker_type = worker_type_name(worker_type)
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
        self._skipped = Skips()
        #: This pass's samples handed out, and skipped because the storage failed.
        self._pass_samples = self._pass_storage_skips = 0
        self._stats = StatsCollector()
        #: Decodes the batches' compressed images on the GPU (GPU image modes only).
        self._gpu_images = gpu_image_hook(dataset)
        #: How a finite pass ends with the other ranks (see :mod:`stoker.runtime.end_sync`).
        self.end_sync = EndSync(sync_end, self)
        #: Energon's watchdog and what a stuck or dead worker does (see
        #: :mod:`stoker.runtime.worker_watch`).
        self.watch = WatchSettings() if watch is None else watch
        #: Samples (dataset, shard, index) a replaced worker was stuck on: skipped this pass.
        self.stuck_samples: set[tuple[int, int, int]] = set()
        #: Times the workers were replaced (all passes).
        self.workers_replaced = 0
        self._yield_log = YieldLog.of(dataset.worker_config)

    def __iter__(self) -> Iterator[Any]:
        if self._finished:
            self._next_pass()
        budget = self.dataset.virtual_epoch_length or None
        count = 0
        while budget is None or count < budget:
            entered = perf_counter()
            if not self.end_sync.advance(self):
                self._finished = self.end_sync.finished
                self._stop()
                self._stats.paused()
                check_storage_share(
                    self._pass_storage_skips,
                    self._pass_samples,
                    self.options.max_storage_skip_share,
                    self.epoch,
                )
                return
            count += 1
            self._stats.handed_out(entered, perf_counter())
            if self._stats_log is not None:
                self._stats_log.tick()
            if self._yield_log is not None:
                self._yield_log.yielded(self.epoch, self.yielded - 1, self._batch)
            yield self._batch if self._gpu_images is None else self._gpu_images(self._batch)
        self._stats.paused()

    def __len__(self) -> int:
        return len(self.dataset)

    def skipped(self) -> Skips:
        """What the error policy skipped before the batches handed out so far (all passes):
        counts by reason, by source dataset and reason, and a few example keys per reason.

        Counted in the workers and carried with the batches they send (no extra round trip).
        Deliberate skips (``SkipSample``) count too, under ``"<hook>: SkipSample"``.

        Example:
            >>> loader.skipped().by_reason  # doctest: +SKIP
            {'encode_batch: ValueError': 2, 'shard: corrupt': 1, 'storage: retries exhausted': 3}
        """
        return self._skipped.copy()

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
            try:
                item = self._live.next_from(k % workers)
            except WorkerReplaced as replaced:  # its workers ended: new ones, here
                self._stop(wait=False)
                self.workers_replaced += 1
                if replaced.sample is not None:
                    self.stuck_samples.add(replaced.sample)
                continue
            if item.skips:
                self._skipped.merge(item.skips)
                self._pass_storage_skips += item.skips.by_reason.get(STORAGE, 0)
            self._pass_samples += item.samples
            if self._pass_samples + self._pass_storage_skips >= STORAGE_WINDOW:
                self._check_storage_window()
            self._stats.received(item)
            if item.kind == ERROR:
                self._stop()
                item.batch.reraise()
            if item.stream != stream:
                raise RuntimeError(f"internal: expected stream {stream}, worker sent {item.stream}")
            self.t += 1
            if item.kind == END:
                self.exhausted.add(stream)
                continue
            assert item.position is not None
            values = item.position  # Position.to_list(), made without the frozen __init__
            self.positions[stream] = position(tuple(map(int, values[:-1])), int(values[-1]))
            if item.held:
                self.buffers[stream] = item.held
            else:
                self.buffers.pop(stream, None)
            self.yielded += 1
            self._batch = item.batch
            return True
        return False

    def _check_storage_window(self) -> None:
        """A pass that never ends (``repeat=True``) is checked window by window."""
        skipped, samples = self._pass_storage_skips, self._pass_samples
        self._pass_samples = self._pass_storage_skips = 0
        try:
            check_storage_share(
                skipped, samples, self.options.max_storage_skip_share, self.epoch, window=True
            )
        except BaseException:
            self._stop()
            raise

    def _next_pass(self) -> None:
        self._end_pass()
        self.epoch += 1
        self.positions = {}  # every stream starts at the new pass (epoch)
        self.buffers = {}
        self.exhausted.clear()
        self.stuck_samples.clear()
        self.t = self.yielded = 0
        self._pass_samples = self._pass_storage_skips = 0
        self._finished = False

    def _stop(self, *, wait: bool = True) -> None:
        if self._live is not None:
            self._live.close(wait=wait)
            self._live = None

    def close(self) -> None:
        """Stop the worker processes (also done when the loader is garbage-collected)."""
        self._stop()
        if self._yield_log is not None:
            self._yield_log.close()

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
