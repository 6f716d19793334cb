"""What a worker sends the main process for each item: the batch and what travels with it.

One :class:`Envelope` per item, whether the worker is a process (the envelope is pickled with its
batch) or a generator in the training process (``num_workers=0``). Besides the batch, it carries
the stream's position after it and what the stream's stages hold (the loader's state), what the
worker skipped since its previous item (:class:`~stoker.pipeline.skips.Skips`), the samples in the
batch, and now and then what the worker measured (:class:`~stoker.pipeline.stage_clock.StageDelta`)
for :meth:`stoker.runtime.loader.Loader.stats`: no extra message, no round trip.

Example:
    >>> item = Envelope(BATCH, worker=0, stream=3, batch=[1, 2], position=[5, 0], samples=2)
    >>> item.kind == BATCH, item.stream, item.samples
    (True, 3, 2)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker.pipeline.refs import Buffers
from stoker.pipeline.skips import Skips
from stoker.pipeline.stage_clock import StageDelta

#: Item kinds: a batch, the end of a stream, a failure (the batch is a ``WorkerFailure``).
BATCH, END, ERROR = 0, 1, 2


@dataclass(slots=True)
class Envelope:
    """One item from a worker (see the module docs)."""

    #: :data:`BATCH`, :data:`END` or :data:`ERROR`.
    kind: int
    #: The dataloader worker that made it.
    worker: int
    #: The stream (virtual worker) it belongs to.
    stream: int
    #: The batch (in transit: an ``Exported`` handle), or the ``WorkerFailure`` of an ERROR.
    batch: Any = None
    #: The stream's position after this batch (``Position.to_list()``).
    position: list[int] | None = None
    #: What the stream's packing/grouping stages hold after it (compacted in transit).
    held: Buffers | None = None
    #: What the worker skipped since its previous item (None: nothing).
    skips: Skips | None = None
    #: Samples that went into the batch.
    samples: int = 0
    #: What the worker measured since its previous delta (None: nothing due yet).
    stats: StageDelta | None = None

    def __reduce__(self) -> tuple[type[Envelope], tuple[Any, ...]]:
        # Pickled by its fields in order (one call to rebuild), not by the slotted dataclass's
        # state (a Python loop over the fields on both sides): one per batch crosses processes.
        return Envelope, (
            self.kind, self.worker, self.stream, self.batch, self.position,
            self.held, self.skips, self.samples, self.stats,
        )  # fmt: skip
