"""Energon's loader entry points: ``get_loader`` and ``get_savable_loader``.

Same names and keyword arguments as ``megatron.energon``; every stoker loader can save and
restore its position, so the two differ only in the class they return.
"""

from __future__ import annotations

from typing import Any, TypeVar

from stoker.errors import ConfigError
from stoker.model.cache_pool import CachePool
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.debug_log import check_debug_path
from stoker.runtime.savable_loader import BasicDataLoader, SavableDataLoader
from stoker.runtime.streams import Loadable
from stoker.storage.options import LoaderOptions

_L = TypeVar("_L", BasicDataLoader, SavableDataLoader)


def get_loader(
    dataset: Loadable,
    *,
    worker_config: WorkerConfig | None = None,
    prefetch_factor: int | None = None,
    pin_memory: bool = False,
    timeout: float = 0.0,
    cache_pool: CachePool | None = None,
    options: LoaderOptions | None = None,
    log_stats_every: float | None = None,
    sync_end: str | None = "auto",
    worker_type: str | None = None,
    **kwargs: Any,
) -> BasicDataLoader:
    """A loader over ``dataset`` with ``worker_config.num_workers`` worker processes.

    ``cache_pool`` (e.g. a :class:`~stoker.FileStoreCachePool`) is what cookers with
    ``need_cache`` get as ``cache=``, in every worker. ``options`` (a
    :class:`~stoker.LoaderOptions`) sizes each worker's read-ahead and batch slots and sets the
    metadata cache and retry budget; None takes them from the environment variables that are
    their defaults, read once, here. ``log_stats_every`` (seconds) logs one line of the
    loader's figures per interval on the ``stoker`` logger (INFO) while iterating, e.g.
    ``stoker: 1,234 samples/s, waited 31% of the last 60 s, bottleneck decode (62%)``; None:
    off (see ``docs/observability.md``). ``prefetch_factor`` (batches each worker prepares
    ahead) defaults to the ``WorkerConfig``'s, else 2. Energon's watchdog arguments
    (``watchdog_timeout_seconds=60``, ``watchdog_initial_timeout_seconds``, ``fail_on_timeout``)
    keep their meaning; ``on_worker_failure="replace"`` replaces a worker stuck past the timeout
    or dead, skipping the sample it was on (see ``docs/worker_failures.md``). ``sync_end``
    says how the ranks end a finite pass (``repeat=False``) together: ``"auto"`` is
    ``"equal"`` for a finite dataset under ``torch.distributed`` (every rank hands out the same
    number of batches; the longer ranks' rest is dropped and counted), also ``"stop_first"``,
    ``"redistribute"``, ``"redistribute_rounds"`` or None (see ``docs/end_of_data.md``).
    ``worker_type`` says where the workers run: ``"fork"``, ``"spawn"`` (processes),
    ``"thread"`` (threads of this process), ``"main"`` (inline), None: processes started the
    ``multiprocessing`` default way; the batches and states are the same for all (see
    ``docs/worker_types.md``).

    Example:
        >>> from stoker import LoaderOptions
        >>> options = LoaderOptions(prefetch_bytes=64 << 20, batch_slots_mb=512)
        >>> loader = get_loader(val_ds, options=options)
        >>> [len(batch.caption) for batch in loader]
        [4, 4, 2]
    """
    return _loader(BasicDataLoader, **locals())  # every argument, by name (see _loader)


def get_savable_loader(
    dataset: Loadable,
    *,
    worker_config: WorkerConfig | None = None,
    prefetch_factor: int | None = None,
    pin_memory: bool = False,
    timeout: float = 0.0,
    cache_pool: CachePool | None = None,
    options: LoaderOptions | None = None,
    log_stats_every: float | None = None,
    sync_end: str | None = "auto",
    worker_type: str | None = None,
    **kwargs: Any,
) -> SavableDataLoader:
    """Like :func:`get_loader`; every stoker loader can save and restore its position.

    ``dataset`` is what ``get_train_dataset`` returns, a ``MixBatchDataset``, or a wrapper
    (``MapDataset``, ``BatchDataset``, ``BlendDataset``, ...) of them. Energon's checkpoint
    cadence arguments are accepted and ignored.
    """
    return _loader(SavableDataLoader, **locals())  # every argument, by name (see _loader)


def _loader(
    loader_class: type[_L],
    dataset: Loadable,
    *,
    worker_config: WorkerConfig | None,
    prefetch_factor: int | None,
    pin_memory: bool,
    timeout: float,
    cache_pool: CachePool | None,
    options: LoaderOptions | None,
    log_stats_every: float | None,
    sync_end: str | None,
    worker_type: str | None,
    kwargs: dict[str, Any],
) -> _L:
    """``get_loader`` / ``get_savable_loader``, which pass all their arguments (one signature,
    Energon's, under two names): a ``loader_class`` over ``dataset``, after checking that
    ``worker_config`` (if given) is the one the dataset was made with."""
    if worker_config is not None and worker_config != dataset.worker_config:
        raise ConfigError(
            "get_loader got another worker_config than the dataset was made with.",
            hint="Pass the same WorkerConfig to get_train_dataset and get_loader (or omit it).",
        )
    check_debug_path(dataset.worker_config)
    if prefetch_factor is None:  # the WorkerConfig's, else PyTorch's default
        prefetch_factor = getattr(dataset.worker_config, "prefetch_factor", None) or 2
    loader = loader_class(
        dataset,
        prefetch_factor=prefetch_factor,
        pin_memory=pin_memory,
        timeout=timeout,
        cache_pool=cache_pool,
        options=options,
        sync_end=sync_end,
        watchdog_trigger=_watchdog_trigger,
        **_watch_args(kwargs),
        worker_type=worker_type,
    )
    loader.log_stats_every(log_stats_every)
    return loader


#: Energon's watchdog arguments of get_loader, and stoker's policy for a stuck or dead worker.
_WATCH_KWARGS = (
    "watchdog_timeout_seconds",
    "watchdog_initial_timeout_seconds",
    "fail_on_timeout",
    "on_worker_failure",
)


def _watch_args(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs[k] for k in _WATCH_KWARGS if k in kwargs}


def _watchdog_trigger(settings: Any) -> None:
    """Energon's hook for a stuck worker (``WatchdogDataset._watchdog_trigger``), looked up when
    called so that code that patches it sees it called."""
    from stoker.wrappers.passthrough import WatchdogDataset

    WatchdogDataset._watchdog_trigger(settings)
