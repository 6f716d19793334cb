"""Whether a loader's float image batches may travel from its workers as uint8.

A worker may build a float image batch as its uint8 pixels and let the main process scale it
(:mod:`stoker.pipeline.main_floats`: a quarter of the shared memory in flight) only where no
user code sees the batch in between: a :class:`~stoker.runtime.dataset.LoaderDataset` (not a
``MixBatchDataset``, whose ``batch_mix_fn`` sees the sub-batches) whose task encoder keeps
``DefaultTaskEncoder.encode_batch``. Images reach the batcher undecoded only where the sample
hooks are the defaults too (:func:`fuses_float_images`); other batches are
built as before.

Example:
    >>> from stoker.model.task import DefaultTaskEncoder
    >>> class Normalised(DefaultTaskEncoder):
    ...     def encode_batch(self, batch):
    ...         return batch
    >>> keeps_encode_batch(DefaultTaskEncoder()), keeps_encode_batch(Normalised())
    (True, False)
"""

from __future__ import annotations

from typing import Any


def keeps_encode_batch(task_encoder: Any) -> bool:
    """Whether ``task_encoder`` batches are encoded by ``DefaultTaskEncoder.encode_batch``."""
    from stoker.model.task import DefaultTaskEncoder

    return isinstance(task_encoder, DefaultTaskEncoder) and not task_encoder._is_overridden(
        task_encoder.encode_batch, (DefaultTaskEncoder,)
    )


def floats_travel_as_uint8(dataset: Any) -> bool:
    """Whether the workers of a loader over ``dataset`` may send float image batches as uint8."""
    # By name: the dataset module imports the loader, which imports this one.
    kind = type(dataset)
    plain = (kind.__module__, kind.__qualname__) == ("stoker.runtime.dataset", "LoaderDataset")
    return plain and keeps_encode_batch(dataset.task_encoder)


def fuses_float_images(
    task_encoder: Any,
    batch_size: int | None,
    packing: bool,
    grouping: bool,
) -> bool:
    """Whether float images may stay uint8 until batching (:meth:`SampleDecoder.fused`).

    Only where no user code sees a decoded sample before it is batched: a
    ``DefaultTaskEncoder`` (or a subclass that only sets the decoder or types) batching plain
    samples. This is a speed-up with identical batches, not a change of behaviour.
    :class:`SampleBuilder` also checks the source for sample loaders, joins and cookers.
    """
    from stoker.model.task import DefaultTaskEncoder

    hooks = ("encode_sample", "preencode_sample", "postencode_sample", "batch")
    default_hooks = isinstance(task_encoder, DefaultTaskEncoder) and not any(
        task_encoder._is_overridden(getattr(task_encoder, hook), (DefaultTaskEncoder,))
        for hook in hooks
    )
    plain = default_hooks and not task_encoder.cookers
    return plain and batch_size is not None and not packing and not grouping
