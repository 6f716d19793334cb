"""What a worker sends the main process for each batch: its pickle, by reference to slots.

An :class:`Exported` carries the pickled batch (or where it lies in the worker's payload ring),
the slots the worker let go of, and what must reach the main process beside the pickle while
the worker still serves it (slot storages sent for the first time, tensors outside slots). See
:mod:`stoker.pipeline.transport`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch


@dataclass(frozen=True)
class Exported:
    """A batch pickled by a worker, its slot tensors by reference."""

    payload: bytes
    #: Slots the worker has let go of since its last batch (the main process unmaps them).
    dropped: tuple[int, ...] = ()
    #: The batch refers to no slot (a plain pickle: loaded without a per-object hook).
    plain: bool = False
    #: The batch refers to nothing its worker serves (no slot, no shared tensor or file
    #: descriptor): it may be loaded any time later (see :mod:`stoker.pipeline.batch_pickler`).
    detached: bool = False
    #: Where the payload lies in the worker's payload ring (then ``payload`` is empty; see
    #: :mod:`stoker.pipeline.payload_ring`), else None.
    span: tuple[int, int, int] | None = None
    #: The worker's ring storage, with its first ring payload.
    ring: Any = None
    #: A plain batch that shares tensors or file descriptors, sent as itself (``payload`` is
    #: empty): the queue's pickler shares them and the main process takes them over as the
    #: message arrives, while the worker still serves them. A payload could be loaded only
    #: after the worker is gone: the data loader lets a worker exit once its last message has
    #: arrived, even where earlier ones of it wait for their turn.
    inline: Any = None
    #: The slot storages the batch is the first to use, sent beside the payload for the same
    #: reason: the main process maps them as the message arrives.
    storages: tuple[torch.UntypedStorage, ...] = ()
    #: The batch's tensors outside slots (torch shares them), beside the payload likewise.
    side: tuple[torch.Tensor, ...] = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.span is not None and self.ring is None and not self.dropped:
            return in_ring, (self.span,)  # most batches of small samples: their span only
        # by its fields in order (one call to rebuild), not by a state dict: one per batch
        return Exported, (self.payload, self.dropped, self.plain, self.detached, self.span,
                          self.ring, self.inline, self.storages, self.side)  # fmt: skip


#: The fields of a batch in its worker's payload ring, but its span (see :func:`in_ring`).
_IN_RING = {f.name: f.default for f in fields(Exported)}
_IN_RING.update(payload=b"", plain=True, detached=True)


def in_ring(span: tuple[int, int, int]) -> Exported:
    """``Exported(b"", (), True, True, span)``: a plain batch at ``span`` of its worker's
    payload ring (the ring sent before), made without the frozen ``__init__`` (a third of the
    CPU; one is made and sent per batch).

    Example:
        >>> in_ring((0, 500, 500)) == Exported(b"", (), True, True, (0, 500, 500))
        True
    """
    made = _new(Exported)
    _set_attr(made, "__dict__", {**_IN_RING, "span": span})
    return made


_new = object.__new__
_set_attr = object.__setattr__
