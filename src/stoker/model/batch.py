"""``Batch``: Energon's base class of batch dataclasses (``from_samples``, ``derive_from``,
``extend``), a keyword-only, slotted dataclass (``edataclass``) as in Energon."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

import torch

from stoker.media.image import DEFERRED_IMAGES
from stoker.model.dataclass_helpers import edataclass
from stoker.model.samples import Extendable, Sample, SourceInfo, pin_memory
from stoker.pipeline.batch import batch_pad_stack

B = TypeVar("B", bound="Batch")


@edataclass
class Batch(Extendable):
    """Base class of batch dataclasses: the metadata of the samples it holds.

    Subclasses may use plain ``@dataclass`` and re-declare the metadata fields (e.g.
    ``__subflavors__: list[dict]`` without a default), as with Energon.

    Example:
        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class CaptionBatch(Batch):
        ...     image: torch.Tensor
        ...     caption: list[str]
        >>> # in a TaskEncoder: def batch(self, samples): return CaptionBatch.from_samples(samples)
    """

    #: The keys of the samples, in batch order. Unlike Energon 7, it and ``__restore_key__``
    #: have defaults (the loader sets ``__restore_key__``), so a ``batch()`` written for Energon 6
    #: that passes neither (Megatron-Bridge 0.3's Qwen-VL task encoder) keeps working.
    __key__: list[str] = dataclasses.field(default_factory=list)
    #: The restore keys of the samples.
    __restore_key__: tuple[Any, ...] = ()
    #: The subflavors of the samples that have some.
    __subflavors__: list[dict[str, Any] | None] | None = None
    #: The sources of all samples, flattened.
    __sources__: tuple[SourceInfo, ...] | None = None

    @classmethod
    def derive_from(cls: type[B], base_batch: Batch, **fields: Any) -> B:
        """A batch of this class with ``fields``, keeping ``base_batch``'s metadata
        (``__key__``, ``__restore_key__``, ``__subflavors__``, ``__sources__``).

        Example:
            >>> raw = Batch(__key__=["a"], __restore_key__=())
            >>> Batch.derive_from(raw).__key__
            ['a']
        """
        meta = {f.name: getattr(base_batch, f.name) for f in dataclasses.fields(Batch)}
        twice = sorted(set(meta) & set(fields))
        if twice:
            raise TypeError(
                f"{cls.__name__}.derive_from takes the metadata {twice} from the base batch; "
                "set them on the result instead, or build the batch with the constructor."
            )
        return cls(**meta, **fields)

    @classmethod
    def from_samples(cls: type[B], samples: Sequence[Sample], **fields: Any) -> B:
        """Batch ``samples``: tensors are padded and stacked, other fields become lists.

        ``fields`` override computed fields. As in Energon, ``__subflavors__`` lists the samples'
        subflavors that are set (left at its default when none is), and ``__sources__`` joins
        the samples' sources (left at its default when no sample has any).
        """
        init: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in fields:
                init[f.name] = fields[f.name]
            elif f.name == "__sources__":
                if any(sample.__sources__ is not None for sample in samples):
                    init[f.name] = tuple(s for sample in samples for s in sample.__sources__ or ())
            elif f.name == "__subflavors__":
                if any(sample.__subflavors__ is not None for sample in samples):
                    init[f.name] = [s.__subflavors__ for s in samples if s.__subflavors__]
            else:
                values = [getattr(sample, f.name) for sample in samples]
                if values and all(isinstance(v, (torch.Tensor, *DEFERRED_IMAGES)) for v in values):
                    init[f.name] = batch_pad_stack(values)
                else:
                    init[f.name] = values
        if "__restore_key__" in init and not fields.get("__restore_key__"):
            init["__restore_key__"] = tuple(init["__restore_key__"])
        return cls(**init)

    def pin_memory(self: B) -> B:
        """A copy whose tensors are in pinned memory."""
        return pin_memory(self)
