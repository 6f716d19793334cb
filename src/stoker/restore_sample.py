"""Load one sample or batch again from its ``__restore_key__`` (Energon's ``restore_sample``).

A sample's key is ``("Webdataset", dataset path, sample index in the split)``; a batch's is
``("BatchDataset", batch index, *its samples' keys)``. Restoring reads those samples again,
runs the task encoder's per-sample hooks on them and, for a batch, ``batch`` and
``encode_batch``, with the batch index the hooks saw (``current_batch_index``).

Example:
    >>> loader = get_loader(dataset)  # doctest: +SKIP
    >>> batch = next(iter(loader))  # doctest: +SKIP
    >>> again = loader.restore_sample(batch.__restore_key__)  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import ConfigError, StokerError
from stoker.pipeline import hook_index
from stoker.pipeline.batching import BATCH_KEY, set_restore_key
from stoker.pipeline.build import SampleBuilder
from stoker.plan import global_to_shard
from stoker.task import iter_encoded, sample_hooks

if TYPE_CHECKING:
    from stoker.dataset import LoaderDataset

#: The first element of a sample's restore key.
SAMPLE_KEY = "Webdataset"


def can_restore(dataset: LoaderDataset) -> bool:
    """Whether the items of ``dataset`` can be rebuilt from their keys (not packed ones: a pack
    is made by user hooks from samples the key does not name)."""
    return dataset.packing_buffer_size is None


def restore_item(dataset: LoaderDataset, key: Sequence[Any]) -> Any:
    """The sample or batch of ``dataset`` whose ``__restore_key__`` is ``key``."""
    if not can_restore(dataset):
        raise ConfigError(
            "restore_sample cannot rebuild packed samples.",
            hint="Check loader.can_restore_sample() first.",
        )
    key = tuple(key)
    if key and key[0] == BATCH_KEY and len(key) >= 2:
        return _batch(dataset, int(key[1]), key[2:], key)
    return _sample(dataset, key, batch_index=0, place=0)


def _batch(dataset: LoaderDataset, index: int, keys: Sequence[Any], key: tuple[Any, ...]) -> Any:
    encoder = dataset.task_encoder
    samples = [_sample(dataset, k, index, place) for place, k in enumerate(keys)]
    hook_index.push(index, index)
    try:
        batch = encoder.batch(samples)
        set_restore_key(batch, key)
        batch = encoder.encode_batch(batch)
        if inspect.isgenerator(batch):
            batch = next(batch)
    finally:
        hook_index.pop()
    return batch


def _sample(dataset: LoaderDataset, key: Any, batch_index: int, place: int) -> Any:
    """The encoded sample at a sample key (its first output, for a generator hook)."""
    if not (isinstance(key, Sequence) and len(key) == 3 and key[0] == SAMPLE_KEY):
        raise ConfigError(
            f"{key!r} is not a restore key stoker made.",
            hint="Pass a sample's or batch's __restore_key__ as the loader returned it.",
        )
    _, path, ref = key
    matches = [source for source in dataset.sources if source.path == path]
    if not matches:
        names = ", ".join(source.path for source in dataset.sources)
        raise ConfigError(f"restore key {key!r} names dataset {path!r}; this one reads {names}.")
    source, ref = matches[0], int(ref)
    if not 0 <= ref < source.total:
        raise ConfigError(f"restore key {key!r}: {path} has {source.total} samples.")
    shard_ids, indices = global_to_shard(source.counts, np.array([ref], dtype=np.int64))
    shard_id, index = int(shard_ids[0]), int(indices[0])
    if source.first_index is not None:
        index += int(source.first_index[shard_id])
    encoder = dataset.task_encoder
    reader = source.reader()
    try:
        sample = SampleBuilder(source, encoder.decoder, encoder).build(
            reader.read(shard_id, index), ref
        )
    finally:
        reader.close()
    hooks = sample_hooks(encoder, packing=False)
    hook_index.push(batch_index, batch_index * (dataset.batch_size or 1) + place)
    try:
        outputs = list(iter_encoded(encoder, sample, hooks=hooks))
    finally:
        hook_index.pop()
    if not outputs:
        raise StokerError(f"the task encoder gives no sample for {key!r} (it skipped it).")
    return outputs[0]
