"""Load one sample or batch again from its ``__restore_key__`` (Energon's ``restore_sample``).

A sample's key is ``("Webdataset", dataset path, sample index in the split)``, and once encoded
``(..., the hooks' sample index, output number)`` (which output of a generator hook); a packed
sample's ``("PackingDataset", output, *its members' keys)``; a batch's ``("BatchDataset", batch
index, *its samples' keys)``. Restoring reads those samples again and runs the task encoder's
hooks on them as the stream did (per-sample hooks, then ``postencode_sample`` and
``pack_selected_samples`` for a pack, then ``batch`` and ``encode_batch`` for a batch), with the
batch index the hooks saw (``current_batch_index``).

Example:
    >>> from stoker import get_loader
    >>> loader = get_loader(train_ds)
    >>> batch = next(iter(loader))
    >>> again = loader.restore_sample(batch.__restore_key__)
    >>> again.__key__ == batch.__key__, bool((again.image == batch.image).all())
    (True, True)
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import ConfigError, StokerError
from stoker.model.task import iter_encoded, sample_hooks
from stoker.pipeline import hook_index
from stoker.pipeline.batching import BATCH_KEY, set_restore_key
from stoker.pipeline.pack import PACK_KEY
from stoker.pipeline.pack_partial import PARTIAL_KEY, wrap
from stoker.plan import global_to_shard
from stoker.runtime.build import SampleBuilder

if TYPE_CHECKING:
    from stoker.runtime.dataset import LoaderDataset

#: The first element of a sample's restore key.
SAMPLE_KEY = "Webdataset"


def can_restore(dataset: LoaderDataset) -> bool:
    """Whether the items of ``dataset`` can be rebuilt from their keys (always: a packed
    sample's key names its members)."""
    return True


def restore_item(dataset: LoaderDataset, key: Sequence[Any]) -> Any:
    """The sample or batch of ``dataset`` whose ``__restore_key__`` is ``key``."""
    key = tuple(key)
    if key and key[0] == BATCH_KEY and len(key) >= 2:
        return _batch(dataset, int(key[1]), key[2:], key)
    return _item(dataset, key, batch_index=0, place=0)


def _batch(dataset: LoaderDataset, index: int, keys: Sequence[Any], key: tuple[Any, ...]) -> Any:
    encoder = dataset.task_encoder
    samples = [_item(dataset, k, index, place) for place, k in enumerate(keys)]
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


def _item(dataset: LoaderDataset, key: Any, batch_index: int, place: int) -> Any:
    """The sample or packed sample at ``key``, as the stream made it."""
    if isinstance(key, Sequence) and len(key) >= 2 and key[0] == PACK_KEY:
        return _pack(dataset, int(key[1]), key[2:], tuple(key), batch_index)
    packing = dataset.packing_size is not None
    sample = _sample(dataset, key, batch_index, place, packing=packing)
    if packing and _unpacked_group(dataset, key):  # it passed postencode_sample alone
        hook_index.push(batch_index, batch_index)
        try:
            sample = _first(dataset.task_encoder.postencode_sample(sample), "postencode_sample")
        finally:
            hook_index.pop()
    return sample


def _unpacked_group(dataset: LoaderDataset, key: Any) -> bool:
    """Whether the sample at ``key`` is of a packing group that is not packed."""
    groups = dataset.packing_groups()
    if groups is None:
        return False
    for d, source in enumerate(dataset.sources):
        if source.path == key[1]:
            return groups.sizes[groups.of_dataset[d]] is None
    return False


def _pack(
    dataset: LoaderDataset, output: int, keys: Sequence[Any], key: tuple[Any, ...], index: int
) -> Any:
    """Output ``output`` of ``pack_selected_samples`` on the members at ``keys`` (each through
    the per-sample hooks and ``postencode_sample``)."""
    encoder = dataset.task_encoder
    members = [_member(dataset, k, index, place) for place, k in enumerate(keys)]
    hook_index.push(index, index)
    try:
        encoded = [_first(encoder.postencode_sample(m), "postencode_sample") for m in members]
        made = encoder.pack_selected_samples(encoded)
        packed = list(made) if inspect.isgenerator(made) else [made]
    finally:
        hook_index.pop()
    if output >= len(packed):
        raise StokerError(
            f"pack_selected_samples gave {len(packed)} output(s) this time, the key {key!r} "
            f"names output #{output}.",
            hint="Packing hooks must give the same outputs for the same samples.",
        )
    set_restore_key(packed[output], key)
    return packed[output]


def _member(dataset: LoaderDataset, key: Any, index: int, place: int) -> Any:
    """A pack member: a sample, or a ``PartialSample`` of one (``(PARTIAL_KEY, key, slice)``)."""
    if isinstance(key, Sequence) and len(key) == 3 and key[0] == PARTIAL_KEY:
        return wrap(_sample(dataset, key[1], index, place, packing=True), key[2])
    return _sample(dataset, key, index, place, packing=True)


def _first(result: Any, hook: str) -> Any:
    if not inspect.isgenerator(result):
        return result
    for value in result:
        return value
    raise StokerError(f"{hook} gave no output for a sample it packed before.")


def _sample(
    dataset: LoaderDataset, key: Any, batch_index: int, place: int, *, packing: bool
) -> Any:
    """The encoded sample at a sample key (its first output, for a generator hook)."""
    if not (isinstance(key, Sequence) and len(key) in (3, 5) and key[0] == SAMPLE_KEY):
        raise ConfigError(
            f"{key!r} is not a restore key stoker made.",
            hint="Pass a sample's or batch's __restore_key__ as the loader returned it.",
        )
    path, ref = key[1], key[2]
    # an encoded sample's key also names the hooks' sample index and which output it was
    sample_index, output = (
        (int(key[3]), int(key[4]))
        if len(key) == 5
        else (batch_index * (dataset.batch_size or 1) + place, 0)
    )
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
    hooks = sample_hooks(encoder, packing=packing)
    hook_index.push(batch_index, sample_index)
    try:
        outputs = list(itertools.islice(iter_encoded(encoder, sample, hooks=hooks), output + 1))
    finally:
        hook_index.pop()
    if len(outputs) <= output:
        raise StokerError(
            f"the task encoder gives {len(outputs)} output(s) for {key!r} this time, the key "
            f"names output #{output}.",
            hint="Per-sample hooks must give the same outputs for the same sample (seed their "
            "random numbers with @stateless(restore_seeds=True)).",
        )
    set_restore_key(outputs[output], tuple(key))
    return outputs[output]
