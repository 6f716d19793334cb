"""The restore fingerprint of a dataset recipe: its fields, listed, and a hash of all of it.

A saved loader state is only valid for the recipe that made it: the same data in the same order.
:func:`dataset_fingerprint` lists the fields a user sets (so a refused restore can say which
changed, saved vs current) and adds ``"recipe"``: a hash of the whole normalised recipe, which
also covers what is too long to list (every shard name, per-shard sample counts, excluded samples,
subset ranges). The topology (ranks, workers) and the batch size are not in the hash: a restore may
change them (elastic restore, :func:`stoker.runtime.state.rebatch`).

Example:
    >>> recipe_hash({"seed_offset": 0}, [b"shards"])
    'sha256:...'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.source import DataSource

#: The hash's key in a fingerprint (``"mix[0].recipe"`` etc. for a dataset inside another).
RECIPE = "recipe"
#: Listed, but not hashed: a restore may change them (see the module docstring), or they are
#: only reported (:func:`stoker.runtime.state.check_fingerprint`).
NOT_HASHED = frozenset({"batch_size", "task_encoder"})


def dataset_fingerprint(dataset: LoaderDataset) -> dict[str, Any]:
    """The fields of ``dataset``'s recipe and its ``"recipe"`` hash (see the module docstring)."""
    sources = dataset.sources
    fields: dict[str, Any] = {
        "dataset": ", ".join(s.path for s in sources),
        "split_part": ", ".join(sorted({s.split_part for s in sources})),
        "samples": sum(s.total for s in sources),
        "shards": sum(len(s.shards) for s in sources),
        "blend": [dataset.blend.kind, *dataset.blend.factors],
        "batch_size": dataset.batch_size,
        "batch_drop_last": dataset.batch_drop_last,
        "training": dataset.training,
        "repeat": dataset.repeat,
        "limit": dataset.limit,
        "virtual_epoch_length": dataset.virtual_epoch_length,
        "seed_offset": dataset.worker_config.seed_offset,
        "virtual_workers": dataset.virtual_workers,
        "shuffle_buffer_size": _sizes(dataset.shuffle_buffer_size),
        "max_samples_per_sequence": dataset.max_samples_per_sequence,
        "parallel_shard_iters": dataset.parallel_shard_iters,
        "shuffle_over_epochs_multiplier": dataset.shuffle_over_epochs_multiplier,
        "task_encoder": type(dataset.task_encoder).__qualname__,
        "packing_buffer_size": _sizes(dataset.packing_buffer_size),
        "group_batches": dataset.group_batches,
    }
    if dataset.blend.schedule is not None:  # only then: other recipes keep their hashes
        fields["blend_schedule"] = dataset.blend.schedule.to_config()
    if dataset.fanout != 1:  # only when workers share streams (stoker.runtime.logical_stride)
        fields["fanout"] = dataset.fanout
    if dataset.plan_keys is not None:  # only after a changed mix (stoker.runtime.mix_change)
        fields["plan_keys"] = [list(key) for key in dataset.plan_keys]
    for d, source in enumerate(sources):
        fields.update(_source_fields(d, source))
        if source.group is not None:  # only then: other recipes keep their hashes
            fields[f"sources[{d}].group"] = source.group
    fields[RECIPE] = recipe_hash(fields, (source_bytes(s) for s in sources))
    return fields


def _source_fields(d: int, source: DataSource) -> dict[str, Any]:
    """Source ``d``'s multiplier, and what cuts it from the whole split where something does."""
    out: dict[str, Any] = {}
    if source.subset is not None:
        out[f"sources[{d}].subset"] = list(source.subset)
    if len(source.excluded):
        out[f"sources[{d}].excluded"] = len(source.excluded)
    out[f"sources[{d}].shuffle_over_epochs_multiplier"] = source.shuffle_over_epochs_multiplier
    return out


def source_bytes(source: DataSource) -> bytes:
    """Everything about ``source`` that decides which sample is at which position."""
    head = json.dumps(
        [source.path, source.split_part, list(source.shards), source.jsonl],
        separators=(",", ":"),
    ).encode()
    arrays = [source.counts, source.excluded]
    if source.first_index is not None:
        arrays.append(source.first_index)
    return head + b"".join(np.asarray(a, "<i8").tobytes() + b"|" for a in arrays)


def recipe_hash(fields: dict[str, Any], details: Iterable[bytes]) -> str:
    """A stable hash of ``fields`` (except :data:`NOT_HASHED` and the hash itself) and
    ``details``."""
    digest = hashlib.sha256()
    hashed = {k: v for k, v in fields.items() if k not in NOT_HASHED and k != RECIPE}
    digest.update(json.dumps(hashed, sort_keys=True, separators=(",", ":")).encode())
    for part in details:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return "sha256:" + digest.hexdigest()[:32]


def has_recipe(fingerprint: dict[str, Any]) -> bool:
    """Whether ``fingerprint`` holds a recipe hash (states from before it have none)."""
    return any(k == RECIPE or k.endswith("." + RECIPE) for k in fingerprint)


def _sizes(setting: Any) -> Any:
    """A buffer size, or a dict per packing group as JSON-safe sorted ``[group, size]`` pairs."""
    if not isinstance(setting, Mapping):
        return setting
    return sorted(([str(k) if k is not None else None, v] for k, v in setting.items()), key=repr)
