"""The loader the training loop holds: canonical batch order, its position, its passes.

Workers produce the batches of the streams they own, each tagged with its stream and the stream's
position after it. The main process takes them in the canonical order (micro-batch ``t`` of this
rank comes from local stream ``t mod L`` and worker ``t mod N``), whatever order they arrive in,
and remembers each stream's position: that is the whole loader state.

Where the batches are made: worker processes (:mod:`stoker.runtime.process_producers`) or this
process (:mod:`stoker.runtime.local_producers`); every worker runs
:func:`~stoker.runtime.worker_items.worker_items`.
"""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter
from types import TracebackType
from typing import Any

from stoker.errors import ConfigError
from stoker.model.cache_pool import CachePool
from stoker.pipeline.refs import Buffers, Position, position
from stoker.pipeline.skips import STORAGE, STORAGE_WINDOW, Skips, check_storage_share
from stoker.runtime.debug_log import YieldLog
from stoker.runtime.end_sync import EndSync
from stoker.runtime.envelope import END, ERROR
from stoker.runtime.gpu_batches import gpu_image_hook
from stoker.runtime.loader_state import LoaderState
from stoker.runtime.loader_stats import LoaderMeasures
from stoker.runtime.local_producers import LocalProducers
from stoker.runtime.process_producers import ProcessProducers
from stoker.runtime.stats import StatsCollector
from stoker.runtime.streams import Loadable, Resume
from stoker.runtime.worker_types import MAIN, THREAD, worker_type_name
from stoker.runtime.worker_watch import WatchSettings, WorkerReplaced
from stoker.storage.options import LoaderOptions


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
        self._live: LocalProducers | ProcessProducers | None = None  # first: __del__ runs
        self.dataset = dataset
        #: Read-ahead, batch slots, cache and retries of the workers (None: from the
        #: environment, read now, in this process).
        self.options = _checked_options(options)
        #: Energon's cache pool for cookers that ask for ``cache=`` (None: read directly).
        self.cache_pool = cache_pool
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.in_process = in_process
        #: Where the workers run: see :mod:`stoker.runtime.worker_types` (None: processes).
        self.worker_type = worker_type_name(worker_type)
        self.streams: list[int] = dataset.topology().rank_streams().tolist()
        self.passed: dict[int, dict[str, int]] = {}
        self.epoch = 0
        self._skipped = Skips()
        self._stats = StatsCollector()
        #: Decodes the batches' compressed images on the GPU (GPU image modes only).
        self._gpu_images = gpu_image_hook(dataset)
        #: How a finite pass ends with the other ranks (see :mod:`stoker.runtime.end_sync`).
        self.end_sync = EndSync(sync_end, self)
        #: Energon's watchdog and what a stuck or dead worker does (see
        #: :mod:`stoker.runtime.worker_watch`).
        self.watch = WatchSettings() if watch is None else watch
        #: Times the workers were replaced (all passes).
        self.workers_replaced = 0
        self._yield_log = YieldLog.of(dataset.worker_config)
        self.exhausted: set[int] = set()
        #: Samples (dataset, shard, index) a replaced worker was stuck on: skipped this pass.
        self.stuck_samples: set[tuple[int, int, int]] = set()
        self._begin_pass()

    def _begin_pass(self) -> None:
        """Every stream at the start of the pass (:attr:`epoch`), nothing handed out yet."""
        self.positions: dict[int, Position] = {}
        #: What each stream's packing/grouping stages held after its last batch (if anything).
        self.buffers: dict[int, Buffers] = {}
        self.exhausted.clear()
        self.stuck_samples.clear()
        self.t = self.yielded = 0
        #: This pass's samples handed out, and skipped because the storage failed.
        self._pass_samples = self._pass_storage_skips = 0
        self._finished = False

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
            >>> from stoker import DefaultTaskEncoder, SkipSample, get_loader, get_val_dataset
            >>> class NoRed(DefaultTaskEncoder):
            ...     def encode_sample(self, sample):
            ...         if "red" in sample.caption:
            ...             raise SkipSample()
            ...         return sample
            >>> ds = get_val_dataset("coco-wds", split_part="val", worker_config=wc,
            ...                      batch_size=4, task_encoder=NoRed())
            >>> loader = get_loader(ds)
            >>> batches = list(loader)
            >>> loader.skipped().by_reason
            {'encode_sample: SkipSample': 6}
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
                self._live = self._start_producers()
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
        self._begin_pass()

    def _start_producers(self) -> LocalProducers | ProcessProducers:
        """Start making batches from the current position: in this process or in workers."""
        resume = Resume(
            dict(self.positions), dict(self.buffers), frozenset(self.exhausted), self.t, self.epoch
        )
        workers = self.dataset.worker_config.num_workers
        if workers == 0 or self.in_process or self.worker_type in (MAIN, THREAD):
            return LocalProducers(self, resume)
        return ProcessProducers(self, resume)

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


def _checked_options(options: LoaderOptions | None) -> LoaderOptions:
    """The loader's options (None: read from the environment now, in this process)."""
    if options is None:
        return LoaderOptions()
    if not isinstance(options, LoaderOptions):
        raise ConfigError(
            f"options={options!r} must be a stoker.LoaderOptions.",
            hint="E.g. options=LoaderOptions(prefetch_bytes=64 << 20).",
        )
    return options


__all__ = ["Loader"]
