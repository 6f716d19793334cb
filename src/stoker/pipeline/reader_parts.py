"""What the parts of :class:`~stoker.pipeline.read.ShardReader` that read runs of one kind
(:mod:`~stoker.pipeline.read_tar`, :mod:`~stoker.pipeline.read_remote`,
:mod:`~stoker.pipeline.read_lines`) use of the reader: its attributes and one-sample methods,
all set and defined by ``ShardReader``."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from stoker.format.tar_members import RawSample
from stoker.pipeline.local_blocks import LocalBlocks
from stoker.pipeline.prefetch import Prefetcher


class ReaderParts:
    """The reader as its run parts see it (declarations only)."""

    shards: list[str]
    jsonl: bool
    _offsets: OrderedDict[str, npt.NDArray[np.uint64]]
    _blocks: LocalBlocks
    _ahead: Prefetcher | None

    if TYPE_CHECKING:

        def read(self, shard_id: int, index: int) -> RawSample: ...

        def _sample(
            self, data: bytes, shard: str, index: int, start: int, end: int
        ) -> RawSample: ...

        def _read(self, shard_id: int, start: int, end: int) -> bytes: ...

        def offsets(self, shard_id: int) -> npt.NDArray[np.uint64]: ...
