"""Energon's ``megatron.energon.sync_end`` wrappers (pull request #146) over a stoker loader.

``StopFirstLoader(loader)`` and ``RedistributeLoader(loader)`` set the loader's
:class:`~stoker.runtime.end_sync.EndSync` mode (``"stop_first"``, ``"redistribute_rounds"``) and
pass everything else through; their saved state is the loader's plus the mode's own flag. The same
modes are ``get_loader(..., sync_end=...)`` in stoker's API.

Example:
    >>> from stoker import get_savable_loader
    >>> loader = StopFirstLoader(get_savable_loader(val_ds))
    >>> [len(batch.caption) for batch in loader]  # one rank: nothing to stop early for
    [4, 4, 2]
    >>> state = loader.save_state_rank()
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.runtime.end_sync import EndSync
from stoker.runtime.loader import Loader
from stoker.runtime.loader_state import gather_states


class _SyncEndLoader:
    mode = "equal"

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        loader.end_sync = EndSync(self.mode, loader)
        self.worker_config = loader.dataset.worker_config

    def __iter__(self) -> Iterator[Any]:
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def save_state_rank(self) -> dict[str, Any]:
        """The loader's state and this mode's flag (plain data)."""
        return {"loader": self.loader.save_state_rank(), "sync_end": self.loader.end_sync.state()}

    def restore_state_rank(self, state: dict[str, Any] | None) -> None:
        self.loader.restore_state_rank(None if state is None else state["loader"])
        self.loader.end_sync.restore(None if state is None else state["sync_end"])

    def save_state_global(self, global_dst_rank: int = 0) -> list[dict[str, Any]] | None:
        """Every rank's :meth:`save_state_rank` on ``global_dst_rank`` (None elsewhere)."""
        group = self.worker_config.data_parallel_group
        return gather_states(self.save_state_rank(), global_dst_rank, group)

    def restore_state_global(
        self, state: list[dict[str, Any]] | None, *, src_rank: int | None = None
    ) -> None:
        """This rank's entry of ``state`` (given on every rank, or on ``src_rank`` only)."""
        if src_rank is not None:
            import torch.distributed as dist

            box = [state]
            group = self.worker_config.data_parallel_group
            source = src_rank if group is None else dist.get_global_rank(group, src_rank)
            dist.broadcast_object_list(box, src=source, group=group)
            state = box[0]
        if state is None:
            raise ValueError("restore_state_global needs the states (or src_rank).")
        self.restore_state_rank(state[self.worker_config.rank])

    def config(self) -> dict[str, Any]:
        return {"type": type(self).__qualname__, "loader": self.loader.config()}  # type: ignore[attr-defined]


class StopFirstLoader(_SyncEndLoader):
    """Every rank stops when the first runs out; the others continue there next pass."""

    mode = "stop_first"


class RedistributeLoader(_SyncEndLoader):
    """After the first rank runs out, the batches left are shared out one global batch at a
    time, as Energon's (``sync_end="redistribute_rounds"``)."""

    mode = "redistribute_rounds"


#: Energon's state class names (a stoker state is plain data: a dict).
StopFirstDataLoaderState = dict
RedistributeDataLoaderState = dict

__all__ = [
    "RedistributeDataLoaderState",
    "RedistributeLoader",
    "StopFirstDataLoaderState",
    "StopFirstLoader",
]
