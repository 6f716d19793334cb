"""``ShuffleBufferDataset``: items of a dataset in a random order, from a buffer of ``size``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.model.worker_config import WorkerConfig
from stoker.plan.rng import keyed_rng
from stoker.runtime.streams import Loadable
from stoker.wrappers.base import StreamContext
from stoker.wrappers.holding import HoldingWrapper, Numbered, pick

#: Purpose tag of the shuffle buffer's draws (distinct from the planner's tags).
SHUFFLE_BUFFER = 101
#: Draws computed at a time.
_BLOCK = 1024


class ShuffleBufferDataset(HoldingWrapper):
    """Each output is a random one of the next ``size`` buffered items (Energon's signature).

    The draws are keyed by (seed, stream, pass, output index), so a restore is exact; it re-reads
    the stream from the oldest item in the buffer (see :mod:`stoker.wrappers.holding`).
    ``get_train_dataset(..., shuffle_buffer_size=...)`` shuffles sample references and re-reads
    nothing else: prefer it for training.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> ds = ShuffleBufferDataset(samples, 8, worker_config=wc)
        >>> keys = [s.__key__ for s in get_loader(ds)]
        >>> sorted(keys) == [s.__key__ for s in get_loader(samples)], keys != sorted(keys)
        (True, True)
    """

    def __init__(self, dataset: Loadable, size: int, *, worker_config: WorkerConfig) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"ShuffleBufferDataset {size=} must be an integer >= 1.")
        self.size = size

    def describe(self) -> dict[str, Any]:
        return {"size": self.size}

    def process(
        self, ctx: StreamContext, items: Iterator[Numbered], held: Any, first: int
    ) -> Iterator[tuple[Any, Any]]:
        draws = _Draws(self.worker_config.seed_offset, ctx.stream, ctx.epoch)
        buffer: list[Numbered] = held or []
        index = first
        for numbered in items:
            buffer.append(numbered)
            if len(buffer) >= self.size:
                yield _take(buffer, draws.at(index))[1], [n for n, _ in buffer]
                index += 1
        while buffer:
            yield _take(buffer, draws.at(index))[1], [n for n, _ in buffer]
            index += 1

    def held_numbers(self, held: Any) -> list[int]:
        return list(held)

    def with_items(self, held: Any, items: Mapping[int, Any]) -> list[Numbered]:
        return [pick(items, n) for n in held]


def _take(buffer: list[Numbered], u: float) -> Numbered:
    """Remove and return the item at ``u`` (in [0, 1)) of the buffer."""
    i = min(int(u * len(buffer)), len(buffer) - 1)
    buffer[i], buffer[-1] = buffer[-1], buffer[i]
    return buffer.pop()


class _Draws:
    """Uniform draws in [0, 1) by output index, computed a block at a time."""

    def __init__(self, seed: int, stream: int, epoch: int) -> None:
        self.key = (seed, SHUFFLE_BUFFER, stream, epoch)
        self.block, self.values = -1, np.empty(0)

    def at(self, index: int) -> float:
        block = index // _BLOCK
        if block != self.block:
            self.block, self.values = block, keyed_rng(*self.key, block).random(_BLOCK)
        return float(self.values[index % _BLOCK])
