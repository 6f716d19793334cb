"""Joins: samples of several datasets matched by key and joined into one sample.

A join leaf of a metadataset becomes one :class:`~stoker.sources.source.DataSource`: the primary
(first) dataset, planned as usual, with a :class:`JoinSpec` attached that holds the partner datasets
and, per primary sample, each partner's sample with the same key (the join index). The workers'
:class:`~stoker.runtime.build.SampleBuilder` reads the partners and calls the joiner.

``nonmatch`` of a partner decides what a primary sample without such a partner becomes:
``error`` (a :class:`~stoker.errors.ConfigError` naming the key), ``skip`` (the primary sample is
excluded) or ``none`` (the joiner gets ``None``). The primary's own ``nonmatch`` is ignored.

Example:
    >>> from stoker.sources.blending import load_sources
    >>> sources, _ = load_sources("joined.yaml", split_part="train", training=False,
    ...                           dataset_config="dataset.yaml", split_config="split.yaml")
    >>> sources[0].join.locations[:, :3]  # the partner's sample of each primary sample
    array([[0, 1, 2]])
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.format import join_index as ji
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG, read_info
from stoker.format.progress import track
from stoker.metadataset import flatten, load_metadataset
from stoker.metadataset.flatten import Leaf
from stoker.metadataset.nodes import JoinNode, ObjectRef
from stoker.sources.allow import check_joiner
from stoker.sources.joiner import resolve_joiner
from stoker.sources.load import load_source
from stoker.sources.source import DataSource
from stoker.storage import open_store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JoinSpec:
    """The partners of a join and where each primary sample's partners are.

    ``locations[p, i]`` is the global index in partner ``p``'s split of the sample whose key is
    that of primary sample ``i`` (indexed like the primary source), or -1.
    """

    partners: tuple[DataSource, ...]
    locations: ji.Int64Array
    names: tuple[str, ...] | None = None
    joiner: ObjectRef | None = None

    def restrict(self, start: int, end: int) -> JoinSpec:
        """The join of primary samples ``start <= i < end`` (follows ``DataSource.restrict``)."""
        return dataclasses.replace(self, locations=self.locations[:, start:end])


@dataclass(frozen=True)
class JoinReport:
    """One join index: its file, whether it was up to date, and how many samples matched."""

    split: str
    datasets: tuple[str, ...]
    path: str | None
    samples: int
    matched: tuple[int, ...]
    up_to_date: bool
    seconds: float


def load_join_source(
    leaf: Leaf, dataset_config: str, split_config: str, options: dict[str, Any]
) -> DataSource:
    """The primary source of a join leaf with its :class:`JoinSpec`, nonmatch and subset applied.

    An index never prepared is built in memory (an info message suggests ``stoker prepare``);
    a YAML prepared before whose indexes do not match this join (datasets or YAML changed since)
    raises, as Energon does; a primary sample without an ``error`` partner raises.
    """
    source, _, _ = _join(leaf, dataset_config, split_config, options, write=False)
    if leaf.subset is None:
        return source
    kept = np.setdiff1d(np.arange(int(source.counts.sum()), dtype=np.int64), source.excluded)
    try:
        start, end = leaf.subset.resolve(len(kept))  # over the joined samples, as Energon
    except (ConfigError, ValueError) as e:
        raise ConfigError(f"invalid subset: {e}", path=leaf.path) from None
    first = int(kept[start]) if start < len(kept) else int(source.counts.sum())
    return source.restrict(first, int(kept[end - 1]) + 1 if end > start else first)


def prepare_joins(
    path: str, *, progress: bool = False, allowed_modules: tuple[str, ...] = ()
) -> list[JoinReport]:
    """Build the join index of every join of every split of the metadataset at ``path``.

    Example:
        >>> [r.matched for r in prepare_joins("joined.yaml")]
        [(40,)]
    """
    metadataset = load_metadataset(path)
    joins = [
        (split, leaf)
        for split in metadataset.splits
        for leaf in flatten(metadataset, split).leaves
        if leaf.join is not None
    ]
    options: dict[str, Any] = {"allowed_modules": allowed_modules}
    reports = [
        prepare_join(leaf, split, DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG, options)
        for split, leaf in track(joins, desc="Joining", unit="join", enabled=progress)
    ]
    if os.path.isfile(path):  # indexes of joins no longer in the YAML are stale: remove them
        for stale in set(ji.cached_indexes(path)) - {r.path for r in reports}:
            os.unlink(stale)
    return reports


def prepare_join(
    leaf: Leaf, split: str, dataset_config: str, split_config: str, options: dict[str, Any]
) -> JoinReport:
    """Build (or check) and write the cached join index of one join leaf."""
    started = time.perf_counter()
    source, path, hit = _join(leaf, dataset_config, split_config, options, write=True)
    spec: JoinSpec = source.join  # type: ignore[assignment]
    return JoinReport(
        split,
        (source.path, *(p.path for p in spec.partners)),
        path,
        int(source.counts.sum()),
        tuple(int((row >= 0).sum()) for row in spec.locations),
        hit,
        time.perf_counter() - started,
    )


def _join(
    leaf: Leaf, dataset_config: str, split_config: str, options: dict[str, Any], *, write: bool
) -> tuple[DataSource, str | None, bool]:
    """The joined source, the cache file (None: the YAML is not a local file) and whether the
    cached index was up to date."""
    node: JoinNode = leaf.join  # type: ignore[assignment]
    parts = [
        load_source(
            part.ref.path,
            split_part=part.ref.split_part or leaf.split_part,
            split_config=part.ref.split_config or split_config,
            dataset_config=part.ref.dataset_config or dataset_config,
            subflavors={**part.ref.subflavors, **leaf.subflavors},  # outer levels win
            **options,
        )
        for part in node.parts
    ]
    configs = [part.ref.split_config or split_config for part in node.parts]
    key = ji.cache_key(
        [
            (s.path, s.split_part, c, ji.dataset_fingerprint(open_store(s.path), c))
            for s, c in zip(parts, configs, strict=True)
        ]
    )
    path = ji.cache_path(node.where.file, key) if os.path.isfile(node.where.file) else None
    shape = (len(parts) - 1, int(parts[0].counts.sum()))
    locations = ji.load_index(path, key, shape) if path is not None else None
    hit = locations is not None
    if locations is None:
        if not write and path is not None and ji.cached_indexes(node.where.file):
            raise _stale_error(node.where.file, parts)
        if not write:
            log.info(
                "building the join index of %s in memory; run `stoker prepare %s` to build it "
                "once and reuse it.",
                ", ".join(s.path for s in parts),
                node.where.file,
            )
        locations = build_locations(parts)
        if write and path is not None:
            ji.save_index(path, key, locations)
    allowed = tuple(options.get("allowed_modules", ()))
    source = _apply_nonmatch(node, parts, locations, resolve=not write, allowed=allowed)
    return source, path, hit


def _stale_error(yaml_path: str, parts: list[DataSource]) -> ConfigError:
    return ConfigError(
        f"the join of {', '.join(s.path for s in parts)} does not match the join indexes "
        "prepared for this metadataset: the YAML or a joined dataset changed since it was "
        "prepared.",
        path=yaml_path,
        hint=f"Run `stoker prepare {yaml_path}` (or prepare_metadataset) again.",
    )


def build_locations(parts: list[DataSource]) -> ji.Int64Array:
    """Per partner, the index of the sample with the key of each primary sample (or -1)."""

    def read(s: DataSource) -> ji.KeyTable:
        return ji.read_key_table(open_store(s.path), s.shards, s.counts, s.excluded)

    with ThreadPoolExecutor(len(parts)) as pool:  # sqlite runs without the GIL
        tables = list(pool.map(read, parts))
    total = int(parts[0].counts.sum())
    rows = [ji.match(tables[0], total, table) for table in tables[1:]]
    return np.stack(rows) if rows else np.zeros((0, total), np.int64)


def _apply_nonmatch(
    node: JoinNode,
    parts: list[DataSource],
    locations: Any,
    *,
    resolve: bool = True,
    allowed: tuple[str, ...] = (),
) -> DataSource:
    primary = parts[0]
    live = np.ones(locations.shape[1], dtype=bool)
    live[primary.excluded] = False
    skipped = np.zeros_like(live)
    for p, part in enumerate(node.parts[1:]):
        missing = live & (locations[p] < 0)
        if part.nonmatch == "skip":
            skipped |= missing
        elif part.nonmatch == "error" and missing.any():
            raise _nonmatch_error(primary, parts[p + 1], int(np.argmax(missing)), missing)
    excluded = np.union1d(primary.excluded, np.flatnonzero(skipped)).astype(np.int64)
    if resolve:  # fail early, here (preparing the index needs no joiner, as in Energon)
        if node.joiner is not None:
            check_joiner(
                node.joiner.module,
                node.joiner.name,
                where=node.where.file,
                data_roots=tuple(p.root for p in parts),
                allowed=tuple(allowed),
            )
        resolve_joiner(node.joiner, node.names, primary.config.sample_type)
    spec = JoinSpec(tuple(parts[1:]), locations, node.names, node.joiner)
    return dataclasses.replace(primary, excluded=excluded, join=spec)


def _nonmatch_error(
    primary: DataSource, partner: DataSource, index: int, missing: Any
) -> Exception:
    ends = np.cumsum(primary.counts)
    shard = int(np.searchsorted(ends, index, side="right"))
    local = index - (int(ends[shard - 1]) if shard else 0)
    store = open_store(primary.path)
    info_position = list(read_info(store).shard_counts).index(primary.shards[shard])
    key = ji.key_at(store, info_position, local)
    return ConfigError(
        f"sample {key!r} ({primary.shards[shard]}) has no sample with the same key in the joined "
        f"dataset {partner.path} (split {partner.split_part!r}); {int(missing.sum())} of "
        f"{len(missing)} samples have none.",
        path=primary.path,
        hint="Set `nonmatch: skip` (drop them) or `nonmatch: none` (join None) on that dataset.",
    )
