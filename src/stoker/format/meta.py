"""The ``.nv-meta`` folder: ``.info.json`` (or legacy ``.info.yaml``) and ``split.yaml``.

``.info.json`` maps each shard (relative path) to its sample count. ``split.yaml`` maps each split
part (train, val, test, ...) to brace patterns of shard names, and may ``exclude`` whole shards or
single samples (``shard.tar/key``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import yaml

from stoker.errors import ConfigError, FormatError, StorageError, did_you_mean
from stoker.format.brace import collapse, expand
from stoker.format.paths import check_all_inside_root
from stoker.format.safe_load import load_yaml_or_json as load_yaml_or_json
from stoker.storage import Store

META_DIR = ".nv-meta"
INFO_JSON = f"{META_DIR}/.info.json"
INFO_YAML = f"{META_DIR}/.info.yaml"
INDEX_SQLITE = f"{META_DIR}/index.sqlite"
INDEX_UUID = f"{META_DIR}/index.uuid"
DEFAULT_SPLIT_CONFIG = "split.yaml"
DEFAULT_DATASET_YAML = "dataset.yaml"

#: Sample counts of ``.info.json`` must be below this (per shard and in total).
MAX_SAMPLE_COUNT = 2**40

#: The version string written into ``.info.json`` (Energon reads it as free text).
FORMAT_WRITER = "stoker"


@dataclass(frozen=True)
class DatasetInfo:
    """The content of ``.info.json``: sample count per shard, in shard order."""

    shard_counts: dict[str, int]
    writer: str | None = None

    @property
    def total_samples(self) -> int:
        return sum(self.shard_counts.values())

    def to_json(self) -> str:
        return json.dumps(
            {"energon_version": self.writer or FORMAT_WRITER, "shard_counts": self.shard_counts},
            indent=2,
        )


def is_prepared(store: Store) -> bool:
    """Whether the dataset has an info file (``energon prepare`` or ``stoker prepare`` ran)."""
    return store.exists(INFO_JSON) or store.exists(INFO_YAML)


def read_info(store: Store, *, allow_outside_paths: bool | None = None) -> DatasetInfo:
    """Read ``.nv-meta/.info.json`` (or the legacy ``.info.yaml``).

    Shard names must stay inside the dataset folder (see :mod:`stoker.format.paths`) unless
    ``allow_outside_paths`` (default: ``STOKER_ALLOW_OUTSIDE_PATHS``) allows more.
    """
    if store.exists(INFO_JSON):
        path = INFO_JSON
    elif store.exists(INFO_YAML):
        path = INFO_YAML
    else:
        raise StorageError(
            "not a prepared dataset: .nv-meta/.info.json is missing.",
            path=store.url(""),
            hint="Run `stoker prepare` on the folder first.",
        )
    raw = load_yaml_or_json(store, path)
    if not isinstance(raw, dict) or not isinstance(raw.get("shard_counts"), dict):
        raise FormatError(
            "invalid info file: expected a mapping with 'shard_counts'.",
            path=store.url(path),
            hint="Re-create it with `stoker prepare --force-overwrite`.",
        )
    counts = raw["shard_counts"]
    total = 0
    for name, count in counts.items():
        if type(count) is not int or not 0 <= count < MAX_SAMPLE_COUNT:
            raise FormatError(
                f"invalid sample count {count!r} for shard {name!r} "
                f"(must be a whole number from 0 to {MAX_SAMPLE_COUNT - 1}).",
                path=store.url(path),
                hint="Re-create it with `stoker prepare --force-overwrite`.",
            )
        total += count
    if total >= MAX_SAMPLE_COUNT:
        raise FormatError(
            f"the shards hold {total} samples in all, more than stoker supports "
            f"({MAX_SAMPLE_COUNT - 1}).",
            path=store.url(path),
            hint="Re-create it with `stoker prepare --force-overwrite`.",
        )
    check_all_inside_root(map(str, counts), store.url(path), allow_outside_paths)
    writer = raw.get("energon_version")
    return DatasetInfo({str(k): int(v) for k, v in counts.items()}, writer)


@dataclass(frozen=True)
class SplitConfig:
    """The content of ``split.yaml``: shard patterns per split part, and exclusions."""

    split_parts: dict[str, list[str]]
    exclude: list[str] = field(default_factory=list)

    def shards(self, split_part: str) -> list[str]:
        """The shards of ``split_part``, brace-expanded, without excluded shards."""
        if split_part not in self.split_parts:
            raise ConfigError(
                f"unknown split part {split_part!r}.",
                hint=f"Valid split parts: {', '.join(sorted(self.split_parts)) or 'none'}.",
            )
        excluded = set(expand(self.exclude))
        return [name for name in expand(self.split_parts[split_part]) if name not in excluded]

    def excluded_samples(self) -> dict[str, set[str]]:
        """Excluded single samples: shard name -> keys (from ``shard.tar/key`` entries)."""
        out: dict[str, set[str]] = {}
        for entry in expand(self.exclude):
            shard, sep, key = _split_sample_exclude(entry)
            if sep:
                out.setdefault(shard, set()).add(key)
        return out

    def to_yaml(self) -> str:
        data = {
            "split_parts": {name: collapse(shards) for name, shards in self.split_parts.items()},
            "exclude": self.exclude,
        }
        return yaml.safe_dump(data, sort_keys=False)


def _split_sample_exclude(entry: str) -> tuple[str, bool, str]:
    """``a/b.tar/key`` -> (``a/b.tar``, True, ``key``); ``a/b.tar`` -> (``a/b.tar``, False, '')."""
    marker = entry.find(".tar/")
    if marker < 0:
        return entry, False, ""
    return entry[: marker + 4], True, entry[marker + 5 :]


def read_split_config(
    store: Store,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    *,
    allow_outside_paths: bool | None = None,
) -> SplitConfig:
    """Read ``.nv-meta/<split_config>`` (falling back to ``split.json`` like Energon).

    Shard names must stay inside the dataset folder, as in :func:`read_info`.
    """
    path = f"{META_DIR}/{split_config}"
    fallback = f"{META_DIR}/split.json"
    if split_config == DEFAULT_SPLIT_CONFIG and not store.exists(path) and store.exists(fallback):
        path = fallback
    if not store.exists(path):
        raise StorageError(
            f"split config {split_config!r} not found.",
            path=store.url(path),
            hint="Run `stoker prepare`, or pass the name of an existing split config.",
        )
    raw = load_yaml_or_json(store, path)
    where = store.url(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("split_parts"), dict):
        raise ConfigError(
            "invalid split config: expected a mapping with 'split_parts'.", path=where
        )
    unknown = set(raw) - {"split_parts", "exclude"}
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(map(str, unknown)))} in split config.",
            path=where,
            hint=did_you_mean(str(min(map(str, unknown))), ["split_parts", "exclude"])
            + "Allowed keys: split_parts, exclude.",
        )
    parts: dict[str, list[str]] = {}
    for name, patterns in raw["split_parts"].items():
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(
                f"split part {name!r} must be a list of shard names or patterns.", path=where
            )
        parts[str(name)] = patterns
    exclude = raw.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(p, str) for p in exclude):
        raise ConfigError("'exclude' must be a list of shard names or patterns.", path=where)
    for patterns in [*parts.values(), exclude]:
        try:  # bounded: a mistyped range fails here, with the file named, not at load
            names = expand(patterns)
        except ConfigError as e:
            raise ConfigError(e.problem, path=where, hint=e.hint) from None
        if patterns is not exclude:
            check_all_inside_root(names, where, allow_outside_paths)
    return SplitConfig(parts, exclude)
