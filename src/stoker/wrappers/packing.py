"""``PackingDataset``: items packed together by a pre-packer and a final packer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from stoker.errors import ConfigError, StokerError
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.streams import Loadable
from stoker.wrappers.base import StreamContext
from stoker.wrappers.batch import check_counted_inside
from stoker.wrappers.calls import Failures, function_name
from stoker.wrappers.holding import HoldingWrapper, Numbered, pick


class PackingDataset(HoldingWrapper):
    """Packs of items, as Energon's ``PackingDataset`` makes them.

    Items fill a buffer of ``buffer_size``; ``pre_packer(buffer) -> [[item, ...], ...]`` chooses
    the packs, and each is joined by ``final_packer(pack)`` (after ``sample_encoder`` on each of
    its items, if given) while the buffer refills. At the end of a finite stream the rest is
    packed too. A restore re-reads the stream from the oldest item buffered (see
    :mod:`stoker.wrappers.holding`); ``get_train_dataset(..., packing_buffer_size=...)`` re-reads
    only the buffered samples.

    Example:
        >>> from stoker import get_loader, get_val_dataset
        >>> samples = get_val_dataset("coco-wds", split_part="val", batch_size=None,
        ...                           worker_config=wc)  # 10 samples, one at a time
        >>> def select(buffer):  # the buffer's samples in packs of two
        ...     return [buffer[i : i + 2] for i in range(0, len(buffer), 2)]
        >>> def pack(samples):
        ...     return " | ".join(s.caption for s in samples)
        >>> ds = PackingDataset(samples, 4, pre_packer=select, final_packer=pack,
        ...                     worker_config=wc)
        >>> [p.count(" | ") + 1 for p in get_loader(ds)]  # the 10 samples, in packs
        [2, 2, 2, 2, 2]
    """

    def __init__(
        self,
        dataset: Loadable,
        buffer_size: int,
        pre_packer: Callable[[list[Any]], list[list[Any]]],
        final_packer: Callable[[list[Any]], Any],
        *,
        final_packer_stateless: bool = False,
        sample_encoder: Callable[[Any], Any] | None = None,
        sample_encoder_stateless: bool = False,
        packer_config: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
        pre_packer_failure_tolerance: int = 100,
        final_packer_failure_tolerance: int = 100,
        sample_encoder_failure_tolerance: int = 100,
        worker_config: WorkerConfig,
    ) -> None:
        super().__init__(dataset, worker_config=worker_config)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ConfigError(f"PackingDataset {buffer_size=} must be an integer >= 1.")
        check_counted_inside(dataset, type(self).__name__)
        self.buffer_size = buffer_size
        self.pre_packer = pre_packer
        self.final_packer = final_packer
        self.final_packer_stateless = final_packer_stateless
        self.sample_encoder = sample_encoder
        self.sample_encoder_stateless = sample_encoder_stateless
        self.packer_config = packer_config
        self.tolerances = (pre_packer_failure_tolerance, final_packer_failure_tolerance,
                           sample_encoder_failure_tolerance)  # fmt: skip

    def describe(self) -> dict[str, Any]:
        return {"buffer_size": self.buffer_size, "pre_packer": function_name(self.pre_packer),
                "final_packer": function_name(self.final_packer)}  # fmt: skip

    def process(
        self, ctx: StreamContext, items: Iterator[Numbered], held: Any, first: int
    ) -> Iterator[tuple[Any, Any]]:
        wc = self.worker_config
        pre = Failures(
            wc, f"pre_packer {function_name(self.pre_packer)}", self.tolerances[0], skips=ctx.skips
        )
        final = Failures(
            wc,
            f"final_packer {function_name(self.final_packer)}",
            self.tolerances[1],
            skips=ctx.skips,
        )
        encode = Failures(wc, "sample_encoder", self.tolerances[2], skips=ctx.skips)
        reading: list[Numbered] = list(held["reading"]) if held else []
        packs: list[list[Numbered]] = [list(p) for p in held["packs"]] if held else []
        rounds = 0

        def numbers() -> dict[str, Any]:
            return {"reading": [n for n, _ in reading], "packs": [[n for n, _ in p] for p in packs]}

        def outputs(pack: list[Numbered]) -> Iterator[tuple[Any, Any]]:
            chosen = [item for _, item in pack]
            if self.sample_encoder is not None:
                chosen = [e for item in chosen for e in encode.run(self.sample_encoder, item)]
            for output in list(final.run(self.final_packer, chosen)) if chosen else []:
                yield output, numbers()

        def pre_pack() -> list[list[Numbered]]:
            made = [pack for r in pre.run(self.pre_packer, [i for _, i in reading]) for pack in r]
            chosen = numbered_packs(reading, made)
            reading.clear()
            return [pack for pack in chosen if pack]

        for numbered in items:
            reading.append(numbered)
            if len(reading) + sum(len(p) for p in packs) < self.buffer_size:
                continue
            while not packs and len(reading) + sum(len(p) for p in packs) >= self.buffer_size:
                packs = pre_pack()
                rounds = rounds + 1 if not packs else 0
                if rounds > self.tolerances[0] > 0:
                    raise StokerError(f"pre_packer {function_name(self.pre_packer)} made no "
                                      f"packs {rounds} times in a row.")  # fmt: skip
                if not packs:
                    break
            if packs:
                yield from outputs(packs.pop(0))
        while packs:
            yield from outputs(packs.pop(0))
        if reading:
            packs = pre_pack()
            while packs:
                yield from outputs(packs.pop(0))

    def held_numbers(self, held: Any) -> list[int]:
        return [*held["reading"], *(n for pack in held["packs"] for n in pack)]

    def with_items(self, held: Any, items: Mapping[int, Any]) -> dict[str, Any]:
        return {
            "reading": [pick(items, n) for n in held["reading"]],
            "packs": [[pick(items, n) for n in pack] for pack in held["packs"]],
        }

    def can_restore_sample(self) -> bool:
        return self.final_packer_stateless and (
            self.sample_encoder is None or self.sample_encoder_stateless
        )


def numbered_packs(reading: list[Numbered], packs: list[list[Any]]) -> list[list[Numbered]]:
    """The packs with their items' numbers: each item is one of the buffered ones (the same
    object; equal objects are told apart by order)."""
    free: dict[int, list[int]] = {}
    for n, item in reversed(reading):
        free.setdefault(id(item), []).append(n)
    items = dict(reading)
    out = []
    for pack in packs:
        numbered = []
        for item in pack:
            numbers = free.get(id(item))
            if not numbers:
                raise StokerError(
                    "pre_packer returned an item that is not one of the samples it was given "
                    "(or one twice).",
                    hint="Return lists of the given samples themselves (packs choose, not copy).",
                )
            n = numbers.pop()
            numbered.append((n, items[n]))
        out.append(numbered)
    return out
