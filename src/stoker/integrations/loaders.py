"""Loader wrappers that training frameworks expect: resumable training, restarting validation.

A stoker :class:`~stoker.runtime.loader.Loader` already knows its position. Frameworks want more
from the object they iterate:

- Lightning: a *training* loader continues where it stopped each time the framework calls
  ``iter()`` on it (a new epoch, or after a restore), and hands out its position as a
  ``state_dict()`` (:class:`ResumableLoader`); a *validation* loader starts over at each
  ``iter()``, even when the last pass was cut short (:class:`RestartingLoader`);
- Megatron: an endless iterator, ``next()`` per micro-batch, with ``save_state()`` /
  ``restore_state()`` (:class:`StokerDataloader`).

Example:
    >>> from stoker import get_savable_loader
    >>> train = ResumableLoader(get_savable_loader(train_ds))
    >>> first = next(iter(train))
    >>> state = train.state_dict()
    >>> resumed = ResumableLoader(get_savable_loader(train_ds))
    >>> resumed.load_state_dict(state)
    >>> next(iter(resumed)).__key__ == next(iter(train)).__key__  # the same next batch
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from stoker.errors import ConfigError
from stoker.runtime.loader import Loader

T = TypeVar("T")

#: Keys under which training frameworks nest a loader state in their checkpoint dicts
#: (Megatron-LM writes ``dataloader_state_dict``, NeMo ``dataloader_state``).
CHECKPOINT_KEYS = ("dataloader_state_dict", "dataloader_state", "train")


def find_loader_state(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The stoker loader state in ``checkpoint``: the state itself, or nested one level deep
    under one of :data:`CHECKPOINT_KEYS`.

    Example:
        >>> find_loader_state({"dataloader_state_dict": {"stoker_state_version": 1}})
        {'stoker_state_version': 1}
    """
    if "stoker_state_version" in checkpoint:
        return dict(checkpoint)
    for key in CHECKPOINT_KEYS:
        nested = checkpoint.get(key)
        if isinstance(nested, Mapping) and "stoker_state_version" in nested:
            return dict(nested)
    raise ConfigError(
        f"no stoker loader state in the checkpoint dict (keys: {sorted(checkpoint)}).",
        hint="Pass what save_state() / state_dict() returned, or a dict holding it under one "
        f"of {', '.join(CHECKPOINT_KEYS)}.",
    )


def cyclic_iter(iterable: Iterable[T]) -> Iterator[T]:
    """Loop over ``iterable`` forever, starting a new pass whenever one ends.

    A stoker loader's next pass continues its sample order (the next epoch), so this never
    repeats an epoch's order. An empty pass ends the loop instead of spinning.

    Example:
        >>> it = cyclic_iter([1, 2])
        >>> [next(it) for _ in range(5)]
        [1, 2, 1, 2, 1]
    """
    while True:
        empty = True
        for item in iterable:
            empty = False
            yield item
        if empty:
            return


def gather_states(loader: Loader) -> list[dict[str, Any]]:
    """The states of every data-parallel rank, on every rank, in rank order.

    A collective under ``torch.distributed`` (all data-parallel ranks must call it together):
    frameworks write the checkpoint of rank 0 only, so it must hold every rank's position.
    """
    state = loader.save_state_rank()
    worker_config = loader.dataset.worker_config
    if worker_config.world_size == 1:
        return [state]
    import torch.distributed as dist

    states: list[Any] = [None] * worker_config.world_size
    dist.all_gather_object(states, state, group=worker_config.data_parallel_group)
    return states


class ResumableLoader:
    """A training loader: each ``iter()`` continues the stream; the state is a plain dict.

    ``__len__`` is the loader's batches per pass, so a framework counts epochs of that many
    batches (with ``repeat=True`` the stream itself never ends). The state holds the positions
    of all data-parallel ranks (``{"ranks": [...]}``), so the checkpoint that rank 0 writes
    resumes every rank, also on another number of ranks when ``virtual_workers`` is fixed. A
    state given before the first batch is applied at once (no workers run until iterated).
    """

    def __init__(self, loader: Loader) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[Any]:
        yield from self.loader

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> dict[str, Any]:
        """``{"ranks": [...]}``: every rank's position after its last batch handed out.

        Under ``torch.distributed`` every data-parallel rank must call it (as Lightning does
        when it saves a checkpoint).
        """
        return {"ranks": gather_states(self.loader)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue after the batch at which ``state`` was saved: the next ``iter()`` yields
        the batch after it. ``state`` is what :meth:`state_dict` returned, or one rank's
        loader state (or a checkpoint dict holding it)."""
        if "ranks" in state:
            self.loader.restore_state_global(list(state["ranks"]))
        else:
            self.loader.restore_state_rank(find_loader_state(state))

    def close(self) -> None:
        """Stop the worker processes."""
        self.loader.close()


class RestartingLoader:
    """A validation loader: every ``iter()`` is a full pass from the first batch."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self._start = loader.save_state_rank()

    def __iter__(self) -> Iterator[Any]:
        self.loader.restore_state_rank(self._start)
        yield from self.loader

    def __len__(self) -> int:
        return len(self.loader)

    def close(self) -> None:
        """Stop the worker processes."""
        self.loader.close()


class StokerDataloader:
    """An endless iterator over a stoker loader for Megatron's training loop (Bridge's
    ``EnergonDataloader``): ``next()`` gives micro-batches, ``save_state()`` the position."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self._iter = cyclic_iter(loader)

    def __iter__(self) -> Iterator[Any]:
        return self._iter

    def __next__(self) -> Any:
        return next(self._iter)

    def save_state(self) -> dict[str, Any]:
        """This rank's position after the last micro-batch handed out (plain data, a few KB)."""
        return self.loader.save_state_rank()

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Continue after the micro-batch at which ``state`` was saved. ``state`` may also be a
        checkpoint dict holding it under ``dataloader_state_dict`` or ``dataloader_state``."""
        self.loader.restore_state_rank(find_loader_state(state))
        self._iter = cyclic_iter(self.loader)


#: Bridge's name for the wrapper.
EnergonDataloader = StokerDataloader
