"""Energon's loader class names, ``SavableDataLoader`` and ``BasicDataLoader``, over stoker's
:class:`~stoker.runtime.loader.Loader`.

Every stoker loader can save and restore its position (each batch carries it), so the two differ
only in the arguments they accept: Energon's checkpoint cadence and garbage-collection settings
are accepted and have nothing to tune in stoker. Its watchdog settings keep their meaning, and
``on_worker_failure="replace"`` replaces a stuck or dead worker (see
:mod:`stoker.runtime.worker_watch`).
"""

from __future__ import annotations

import warnings
from typing import Any

from stoker.model.cache_pool import CachePool
from stoker.runtime.loader import Loader
from stoker.runtime.streams import Loadable
from stoker.runtime.worker_watch import WatchSettings


class BasicDataLoader(Loader):
    """A loader over ``dataset`` (what :func:`stoker.get_loader` returns; Energon's signature).

    Example:
        >>> loader = BasicDataLoader(val_ds)
        >>> [len(batch.caption) for batch in loader]
        [4, 4, 2]
    """

    def __init__(
        self,
        dataset: Loadable,
        gc_collect_every_n_steps: int = 10,
        gc_freeze_at_start: bool = True,
        prefetch_factor: int = 2,
        cache_pool: CachePool | None = None,
        watchdog_timeout_seconds: float | None = 60,
        watchdog_initial_timeout_seconds: float | None = None,
        fail_on_timeout: bool = False,
        on_worker_failure: str = "raise",
        **options: Any,
    ) -> None:
        watch = _watch(watchdog_timeout_seconds, watchdog_initial_timeout_seconds,
                       fail_on_timeout, on_worker_failure, options)  # fmt: skip
        super().__init__(dataset, prefetch_factor=prefetch_factor, cache_pool=cache_pool,
                         watch=watch, **options)  # fmt: skip

    def config(self) -> dict[str, Any]:
        """What defines this loader's output (Energon's method)."""
        return loader_config(self)


class SavableDataLoader(Loader):
    """A loader whose position saves and restores (what :func:`stoker.get_savable_loader`
    returns; Energon's signature).

    ``checkpoint_every_sec``, ``checkpoint_every_min_n_samples`` and ``n_checkpoints`` tune how
    often Energon's workers snapshot their state; stoker's state is the position each batch
    carries, so :meth:`save_state_rank` is exact at any batch without them.

    Example:
        >>> loader = SavableDataLoader(train_ds)
        >>> batches = iter(loader)
        >>> first = next(batches)
        >>> state = loader.save_state_rank()
        >>> resumed = SavableDataLoader(train_ds)
        >>> resumed.restore_state_rank(state)
        >>> next(iter(resumed)).__key__ == next(batches).__key__
        True
    """

    def __init__(
        self,
        dataset: Loadable,
        *,
        checkpoint_every_sec: float = 60,
        checkpoint_every_min_n_samples: int | None = None,
        n_checkpoints: int | None = None,
        gc_collect_every_n_steps: int = 10,
        gc_freeze_at_start: bool = True,
        prefetch_factor: int = 2,
        cache_pool: CachePool | None = None,
        watchdog_timeout_seconds: float | None = 60,
        watchdog_initial_timeout_seconds: float | None = None,
        fail_on_timeout: bool = False,
        on_worker_failure: str = "raise",
        **options: Any,
    ) -> None:
        watch = _watch(watchdog_timeout_seconds, watchdog_initial_timeout_seconds,
                       fail_on_timeout, on_worker_failure, options)  # fmt: skip
        super().__init__(dataset, prefetch_factor=prefetch_factor, cache_pool=cache_pool,
                         watch=watch, **options)  # fmt: skip

    def save_state(self, dst_rank: int) -> list[dict[str, Any]] | None:
        """Deprecated in Energon: :meth:`save_state_global`."""
        warnings.warn("save_state is deprecated (as in Energon): use save_state_global.",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        return self.save_state_global(dst_rank)

    def restore_state(self, state: list[dict[str, Any]] | None) -> None:
        """Deprecated in Energon: :meth:`restore_state_global`."""
        warnings.warn("restore_state is deprecated (as in Energon): use restore_state_global.",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        self.restore_state_global(state)

    def config(self) -> dict[str, Any]:
        """What defines this loader's output (Energon's method): its type, workers and the
        dataset's configuration (the fingerprint a saved state is checked against)."""
        return loader_config(self)


def loader_config(loader: Loader) -> dict[str, Any]:
    workers = loader.dataset.worker_config.num_workers
    return {
        "type": type(loader).__qualname__,
        "num_workers": workers,
        "pin_memory": loader.pin_memory,
        "prefetch_factor": None if workers == 0 else loader.prefetch_factor,
        "dataset": loader.dataset.fingerprint(),
    }


def _watch(
    timeout: float | None,
    initial_timeout: float | None,
    fail_on_timeout: bool,
    on_worker_failure: str,
    options: dict[str, Any],
) -> WatchSettings:
    """The watchdog settings of Energon's loader arguments (``watchdog_trigger`` is taken out
    of the other ``options``)."""
    trigger = options.pop("watchdog_trigger", None)
    return WatchSettings(timeout, initial_timeout, fail_on_timeout, on_worker_failure, trigger)
