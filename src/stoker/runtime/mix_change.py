"""Restoring a state into a changed mix: each dataset, known by its identity, continues in place.

A dataset in a blend is identified by its **path, split part, subset and subflavors** (the same
dataset reached twice counts in order of appearance: first with first). A state records, per
dataset, that identity, the key of its stream plans (``(dataset id, rotation)``: its shuffled
order) and a hash of what it holds (shards, sample counts, exclusions): ``state["datasets"]``,
about 150 bytes each.

On restore (:func:`reconcile`), the loader's datasets are matched to the saved ones. A matched
dataset keeps its plan key, so it continues in its own order at its saved count: within its pass
no sample comes twice and none is skipped, whatever its place in the new metadataset (nesting and
weights may change, as may the number of ranks). A new dataset starts at its beginning; a removed
one is listed. The blend then draws as if it started at the restored counts (``"origins"``, per
stream): the new weights hold from the change on, with no burst to catch up on the past.

A changed mix is refused unless the restore allows it (``allow_mix_change=True``), with an error
listing the datasets and weights that differ. Only a weighted blend (or one dataset) can change:
not an epochized one (its passes are allotments of the old mix), not with packing or grouping
buffers held. A sample whose outputs (``encode_sample`` yielding several) were split between two
batches at the save gives no more outputs after the change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import ConfigError
from stoker.pipeline.schedule import BlendSpec, StreamSchedule
from stoker.plan.slices import stream_range
from stoker.plan.weights import BlendWeights
from stoker.runtime.fingerprint import RECIPE, has_recipe, source_bytes
from stoker.runtime.state import check_fingerprint, fingerprint_diff
from stoker.runtime.state_schema import bad_field

if TYPE_CHECKING:
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.source import DataSource

_LOG = logging.getLogger(__name__)
#: Fingerprint fields that describe the mix: a changed mix may change them.
_MIX_FIELDS = frozenset({"dataset", "split_part", "samples", "shards", "blend", "blend_schedule",
                         "plan_keys", RECIPE})  # fmt: skip
_OPTION = "allow_mix_change=True"


def identity(source: DataSource) -> dict[str, Any]:
    """What names a dataset across mixes: path, split part, subset and subflavors.

    Example:
        >>> import numpy as np
        >>> from stoker.format.dataset_config import DatasetConfig
        >>> from stoker.sources.source import DataSource
        >>> config = DatasetConfig(None, None)
        >>> src = DataSource("/data/a", "train", ("0.tar",), np.array([10]), config)
        >>> identity(src)
        {'path': '/data/a', 'split': 'train'}
    """
    out: dict[str, Any] = {"path": source.path, "split": source.split_part}
    if source.subset is not None:
        out["subset"] = list(source.subset)
    if source.subflavors:
        out["subflavors"] = json.loads(json.dumps(source.subflavors, sort_keys=True, default=str))
    return out


def entries(dataset: LoaderDataset) -> list[dict[str, Any]]:
    """``state["datasets"]``: per source its identity, plan key and content hash."""
    return [
        {
            **identity(s),
            "plan": list(dataset.plan_key(d)),
            "samples": s.total,
            "content": _content(s),
        }
        for d, s in enumerate(dataset.sources)
    ]


def _content(source: DataSource) -> str:
    digest = hashlib.sha256(source_bytes(source))
    digest.update(str(source.shuffle_over_epochs_multiplier).encode())
    return digest.hexdigest()[:16]


def name(entry: dict[str, Any]) -> str:
    """A dataset's identity in one short string, for messages."""
    extra = [entry["split"]]
    if "subset" in entry:
        extra.append("subset {}-{}".format(*entry["subset"]))
    if "subflavors" in entry:
        extra.append(f"subflavors {entry['subflavors']}")
    return f"{entry['path']} [{', '.join(extra)}]"


@dataclass(frozen=True)
class MixChange:
    """What a restore into a changed mix did (``loader.mix_change``).

    ``kept``: ``(dataset, weight saved, weight now)``; weights are the blend's weights at batch 0,
    ``"scheduled"`` marks a blend with schedules. ``added`` start at their beginning;
    ``removed``: ``(dataset, references it had given)``.
    """

    kept: tuple[tuple[str, str, str], ...]
    added: tuple[tuple[str, str], ...]
    removed: tuple[tuple[str, int], ...]

    def summary(self) -> str:
        """One line: kept (with weights that changed), added, removed."""
        moved = [f"{n} {a} -> {b}" for n, a, b in self.kept if a != b]
        parts = [f"kept {len(self.kept)} dataset(s) at their positions"]
        if moved:
            parts.append("weights " + "; ".join(moved))
        if self.added:
            parts.append("added (from the start) " + "; ".join(f"{n} {w}" for n, w in self.added))
        if self.removed:
            parts.append(
                "removed " + "; ".join(f"{n} (after {c} samples)" for n, c in self.removed)
            )
        return "restored into a changed mix: " + ", ".join(parts) + "."


def reconcile(
    state: dict[str, Any], dataset: LoaderDataset, *, allow: bool
) -> tuple[LoaderDataset, dict[str, Any], MixChange | None]:
    """``dataset`` with the saved plan keys and blend origins, the state to restore, and what
    changed (None: the same mix). Raises a :class:`ConfigError` for a refused change."""
    saved = state.get("datasets")
    if saved is None or not has_recipe(state["fingerprint"]):
        return dataset, state, None  # saved before stoker recorded identities: the plain check
    _check_lengths(state, len(saved))
    current = entries(dataset)
    match = _match(saved, current)
    keys = _plan_keys(dataset, saved, current, match, state["fingerprint"])
    origins = {int(s): tuple(c) for s, c in state.get("origins", {}).items()}
    adopted = dataclasses.replace(dataset, plan_keys=keys, blend_origins=origins or None)
    now = adopted.fingerprint()
    old = state["fingerprint"]
    if not _mix_diff(old, now):
        return adopted, state, None
    other = _plain(old, now)
    if fingerprint_diff(*other):  # not only the mix changed: the usual error lists it all
        check_fingerprint({**state, "fingerprint": other[0]}, other[1])
    for d, m in enumerate(match):
        if m is not None and saved[m]["content"] != current[d]["content"]:
            check_fingerprint(state, now)  # lists the fields that differ, if any do
            raise ConfigError(
                f"dataset {name(current[d])} holds other shards or samples than when the state "
                "was saved, so its saved position does not name the same samples.",
                hint="Restore with the dataset as it was, or give it another split or subset so "
                "it starts as a new dataset.",
            )
    weights = _weights(old, len(saved)), _weights(now, len(current))
    change = _describe(saved, current, match, weights, state)
    if not allow:
        fields = [k for k in set(old) | set(now) if _is_mix(k) and k != RECIPE]
        mixed = fingerprint_diff({k: old.get(k) for k in fields}, {k: now.get(k) for k in fields})
        raise ConfigError(
            "the loader state was saved with another mix of datasets:\n  "
            + "\n  ".join([*_lines(change), "fields that differ:", *mixed]),
            hint=f"To continue each dataset at its saved position (new ones from their start), "
            f"restore with {_OPTION} (restore_state_rank / restore_state_global, or "
            "LoaderOptions); else restore with the metadataset it was saved with.",
        )
    _check_changeable(state, saved, current, match, old, adopted)
    moved = _move(state, saved, adopted, match)
    _LOG.warning("%s", change.summary())
    return moved[0], moved[1], change


def _check_lengths(state: dict[str, Any], n: int) -> None:
    """Positions and origins hold one count per saved dataset (a sized blend: and a total)."""
    for field in ("streams", "origins"):
        for key, values in state.get(field, {}).items():
            fits = len(values) in (n + 1, 2 * n + 1) if field == "streams" else len(values) == n
            if not fits:
                raise ConfigError(
                    f"loader state field {field}[{key!r}] has {len(values)} values, but the "
                    f"state lists {n} datasets (field 'datasets').",
                    hint="Pass the state save_state_rank() returned, unchanged.",
                )


def _key(entry: dict[str, Any]) -> str:
    return json.dumps({k: entry[k] for k in ("path", "split", "subset", "subflavors")
                       if k in entry}, sort_keys=True)  # fmt: skip


def _match(saved: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[int | None]:
    """Per current dataset, the saved one of the same identity (None: new)."""
    left: dict[str, list[int]] = {}
    for i, entry in enumerate(saved):
        left.setdefault(_key(entry), []).append(i)
    return [left[k].pop(0) if left.get(k := _key(e)) else None for e in current]


def _plan_keys(
    dataset: LoaderDataset,
    saved: list[dict[str, Any]],
    current: list[dict[str, Any]],
    match: list[int | None],
    fingerprint: dict[str, Any],
) -> tuple[tuple[int, int], ...] | None:
    """Matched datasets keep their saved keys; new ones get an unused id. None: the defaults."""
    used = {int(saved[m]["plan"][0]) for m in match if m is not None}
    keys: list[tuple[int, int]] = []
    for d, m in enumerate(match):
        if m is not None:
            keys.append((int(saved[m]["plan"][0]), int(saved[m]["plan"][1])))
            continue
        free = d
        while free in used:
            free += 1
        used.add(free)
        keys.append((free, int(current[d]["plan"][1])))
    default = [tuple(e["plan"]) for e in current]
    if keys == default and "plan_keys" not in fingerprint:
        return None
    return tuple(keys)


def _mix_diff(old: dict[str, Any], now: dict[str, Any]) -> bool:
    return any(old.get(k) != now.get(k) for k in set(old) | set(now) if k != "task_encoder")


def _is_mix(field: str) -> bool:
    return field in _MIX_FIELDS or field.startswith("sources[")


def _plain(old: dict[str, Any], now: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both fingerprints without the fields a changed mix may change."""
    return ({k: v for k, v in old.items() if not _is_mix(k)},
            {k: v for k, v in now.items() if not _is_mix(k)})  # fmt: skip


def _weights(fingerprint: dict[str, Any], n: int) -> list[str]:
    """Each dataset's share in words: the blend's weight, normalised; under a schedule, its
    share at batch 0 and the word "scheduled"."""
    blend = _saved_blend(fingerprint)
    factors = blend[1:] if len(blend) == n + 1 else [1.0] * n
    schedule = _saved_schedule(fingerprint)
    if schedule is None:
        return [f"share {f:.3g}" for f in factors]
    at = schedule.at([0])[:, 0]
    shares = at / at.sum() if at.sum() > 0 else at
    return [f"share {f:.3g} at batch 0, scheduled" for f in shares.tolist()]


def _saved_blend(fingerprint: dict[str, Any]) -> list[Any]:
    """The blend a state was saved with: its kind, then its weights (checked by the schema)."""
    return fingerprint.get("blend") or ["single"]


def _saved_schedule(fingerprint: dict[str, Any]) -> BlendWeights | None:
    """The weight schedule a state was saved with (None: fixed weights)."""
    config = fingerprint.get("blend_schedule")
    if config is None:
        return None
    try:
        return BlendWeights.from_config(config)
    except ConfigError:
        raise
    except Exception as e:
        raise bad_field("fingerprint.blend_schedule", config, f"a weight schedule ({e})") from None


def _describe(
    saved: list[dict[str, Any]],
    current: list[dict[str, Any]],
    match: list[int | None],
    weights: tuple[list[str], list[str]],
    state: dict[str, Any],
) -> MixChange:
    kept = [(name(current[d]), weights[0][m], weights[1][d]) for d, m in enumerate(match)
            if m is not None]  # fmt: skip
    added = [(name(e), weights[1][d]) for d, e in enumerate(current) if match[d] is None]
    gone = sorted(set(range(len(saved))) - {m for m in match if m is not None})
    taken = [sum(p[i] for p in state["streams"].values()) for i in gone]
    return MixChange(tuple(kept), tuple(added), tuple(zip(map(name, (saved[i] for i in gone)),
                                                          taken, strict=True)))  # fmt: skip


def _lines(change: MixChange) -> list[str]:
    lines = [f"{n}: saved {a}, now {b}" for n, a, b in change.kept if a != b]
    lines += [f"{n}: added ({w})" for n, w in change.added]
    lines += [f"{n}: removed (it had given {c} samples)" for n, c in change.removed]
    return lines


def _check_changeable(
    state: dict[str, Any],
    saved: list[dict[str, Any]],
    current: list[dict[str, Any]],
    match: list[int | None],
    old: dict[str, Any],
    adopted: LoaderDataset,
) -> None:
    kinds = {_saved_blend(old)[0], adopted.blend.kind}
    if kinds & {"epochized", "concat"}:
        raise ConfigError(
            f"a changed mix cannot be restored into or from a {' or '.join(sorted(kinds))} blend: "
            "its passes are allotments of one mix.",
            hint="Change the mix of weighted blends (blend with weights or schedules).",
        )
    if any(state.get("buffers", {}).values()):
        raise ConfigError(
            "this state holds samples in packing or grouping buffers, which refer to the datasets "
            "by their place in the saved mix; a changed mix cannot take them over.",
            hint="Change the mix of a loader without packing or grouped batches.",
        )


def _move(
    state: dict[str, Any],
    saved: list[dict[str, Any]],
    adopted: LoaderDataset,
    match: list[int | None],
) -> tuple[LoaderDataset, dict[str, Any]]:
    """The state's positions in the new order, and the dataset drawing from there."""
    streams: dict[str, list[int]] = {}
    sized = [0] * len(match) if adopted.sized_blend else []  # size totals restart at the change
    for key, position in state["streams"].items():
        start = adopted.schedule(int(key)).start(state["epoch"])
        done = _finish_pending(state, saved, int(key), position)
        counts = [start[d] if m is None else done[m] for d, m in enumerate(match)]
        streams[key] = [*counts, *sized, 0]
    origins: dict[int, tuple[int, ...]] | None = None
    if adopted.blend.kind == "weighted":
        origins = {int(k): tuple(p[: len(match)]) for k, p in streams.items()}
    moved = dataclasses.replace(adopted, blend_origins=origins)
    out = {
        **state,
        "fingerprint": moved.fingerprint(),
        "datasets": entries(moved),
        "streams": streams,
    }
    out.pop("origins", None)
    if origins:
        out["origins"] = {str(s): list(c) for s, c in origins.items()}
    return moved, out


def _finish_pending(
    state: dict[str, Any], saved: list[dict[str, Any]], stream: int, position: list[int]
) -> list[int]:
    """The saved counts of ``stream`` with the reference it had started counted as taken.

    A position ``(counts, skip > 0)`` means ``skip`` outputs of the *next* reference were used;
    which dataset that is, the saved blend decides: it is replayed here from the fingerprint
    (weights or schedule) and each dataset's samples in the stream. Outputs of that sample
    beyond ``skip`` (an ``encode_sample`` that yields several) are not given after the change.
    """
    n = len(saved)
    counts = list(position[:n])
    if not position[-1]:
        return counts
    old = state["fingerprint"]
    blend = _saved_blend(old)
    spec = BlendSpec(blend[0], tuple(blend[1:]), _saved_schedule(old))
    v = int(state["topology"]["virtual_workers"])
    lengths = [
        int(np.diff(stream_range(int(e["samples"]), stream, v, int(e["plan"][1])))[0])
        for e in saved
    ]
    origin = state.get("origins", {}).get(str(stream))
    replay = StreamSchedule(
        [], spec, seed=int(old.get("seed_offset", 0)), stream=stream, repeat=True,
        batch_size=int(old.get("batch_size") or 1), virtual_workers=v,
        sized=len(position) == 2 * n + 1, origin=origin, lengths=lengths,
    )  # fmt: skip
    pending = replay.next_block(position[:-1], None, 1)
    if len(pending):
        counts[int(pending[0])] += 1
    return counts
