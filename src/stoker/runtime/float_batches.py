"""Whether a loader's float image batches may travel from its workers as uint8.

A worker may build a float image batch as its uint8 pixels and let the main process scale it
(:mod:`stoker.pipeline.main_floats`: a quarter of the shared memory in flight) only where no
user code sees the batch in between: a :class:`~stoker.runtime.dataset.LoaderDataset` (not a
``MixBatchDataset``, whose ``batch_mix_fn`` sees the sub-batches) whose task encoder keeps
``DefaultTaskEncoder.encode_batch``. Images reach the batcher undecoded only where the sample
hooks are the defaults too (:func:`stoker.runtime.build.fuses_float_images`); other batches are
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
