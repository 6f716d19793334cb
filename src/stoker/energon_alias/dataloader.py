"""``megatron.energon.dataloader``: the loader of Energon's pull request #162, over stoker's.

#162 replaces torch's ``DataLoader`` with its own, whose ``worker_type`` is a worker class
(``ForkDataLoaderWorker``, ``ThreadDataLoaderWorker``). Here those classes are names of
stoker's worker types (:mod:`stoker.runtime.worker_types`) and :class:`DataLoader` is a
:class:`~stoker.SavableDataLoader` that takes them.

Example:
    >>> from stoker.runtime.worker_types import worker_type_name
    >>> worker_type_name(ThreadDataLoaderWorker), worker_type_name(ForkDataLoaderWorker)
    ('thread', 'fork')
"""

from __future__ import annotations

from typing import Any

from stoker.runtime.savable_loader import SavableDataLoader
from stoker.runtime.streams import Loadable


class DataLoaderWorker:
    """A worker kind of #162's loader (a name here: stoker runs its own workers)."""


class ForkDataLoaderWorker(DataLoaderWorker):
    """Worker processes (``worker_type="fork"``)."""


class ThreadDataLoaderWorker(DataLoaderWorker):
    """Threads of the training process (``worker_type="thread"``)."""


class DataLoader(SavableDataLoader):
    """#162's loader: ``DataLoader(dataset, worker_type=ThreadDataLoaderWorker, ...)``.

    Example:
        >>> loader = DataLoader(val_ds, worker_type=ThreadDataLoaderWorker)
        >>> [len(batch.caption) for batch in loader]
        [4, 4, 2]
    """

    def __init__(
        self, dataset: Loadable, *, worker_type: Any = ForkDataLoaderWorker, **options: Any
    ) -> None:
        if dataset.worker_config.num_workers == 0:
            worker_type = "main"  # #162: no workers, the main process loads
        super().__init__(dataset, worker_type=worker_type, **options)

    def with_restored_state_rank(self, state: dict[str, Any] | None) -> DataLoader:
        """This loader, restored to ``state`` (#162's chaining form)."""
        self.restore_state_rank(state)
        return self

    def shutdown(self) -> None:
        """Stop the workers (#162's name for :meth:`close`)."""
        self.close()


__all__ = ["DataLoader", "DataLoaderWorker", "ForkDataLoaderWorker", "ThreadDataLoaderWorker"]
