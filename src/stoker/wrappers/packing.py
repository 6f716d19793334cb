"""``PackingDataset``: items packed together by a pre-packer and a final packer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stoker.errors import ConfigError, StokerError
from stoker.streams import Loadable
from stoker.worker_config import WorkerConfig
from stoker.wrappers.base import Failures, Mark, StreamContext, function_name
from stoker.wrappers.batch import check_counted_inside
from stoker.wrappers.replay import Marked, ReplayWrapper, Step


class PackingDataset(ReplayWrapper):
    """Packs of items, as Energon's ``PackingDataset`` makes them.

    Items fill a buffer of ``buffer_size``; ``pre_packer(buffer) -> [[item, ...], ...]`` chooses
    the packs, and each is joined by ``final_packer(pack)`` (after ``sample_encoder`` on each of
    its items, if given) while the buffer refills. At the end of a finite stream the rest is
    packed too. Restores replay (see :mod:`stoker.wrappers.replay`); for training,
    ``get_train_dataset(..., packing_buffer_size=...)`` restores from references instead.

    Example:
        >>> ds = PackingDataset(ds, 64, pre_packer=select, final_packer=pack,  # doctest: +SKIP
        ...                     worker_config=wc)
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

    def process(self, ctx: StreamContext, items: Iterator[Marked], first: int) -> Iterator[Step]:
        wc = self.worker_config
        pre = Failures(wc, f"pre_packer {function_name(self.pre_packer)}", self.tolerances[0])
        final = Failures(wc, f"final_packer {function_name(self.final_packer)}", self.tolerances[1])
        encode = Failures(wc, "sample_encoder", self.tolerances[2])
        reading: list[Any] = []
        packs: list[list[Any]] = []
        last: Mark = ctx.start
        source = iter(items)
        rounds = 0

        def outputs(pack: list[Any]) -> Iterator[Step]:
            if self.sample_encoder is not None:
                pack = [e for item in pack for e in encode.run(self.sample_encoder, item)]
            made = list(final.run(self.final_packer, pack)) if pack else []
            for i, output in enumerate(made, start=1):
                yield output, last, not reading and not packs and i == len(made)

        def pre_pack() -> list[list[Any]]:
            chosen = [list(p) for r in pre.run(self.pre_packer, list(reading)) for p in r]
            reading.clear()
            return [p for p in chosen if p]

        while True:
            while len(reading) + sum(len(p) for p in packs) < self.buffer_size:
                try:
                    item, last = next(source)
                except StopIteration:
                    break
                reading.append(item)
            else:
                if not packs:
                    packs = pre_pack()
                    rounds = rounds + 1 if not packs else 0
                    if rounds > self.tolerances[0] > 0:
                        raise StokerError(f"pre_packer {function_name(self.pre_packer)} made no "
                                          f"packs {rounds} times in a row.")  # fmt: skip
                    if not packs:
                        continue
                yield from outputs(packs.pop(0))
                continue
            break
        while packs:
            yield from outputs(packs.pop(0))
        if reading:
            packs = pre_pack()
            while packs:
                yield from outputs(packs.pop(0))

    def can_restore_sample(self) -> bool:
        return self.final_packer_stateless and (
            self.sample_encoder is None or self.sample_encoder_stateless
        )
