"""Check a dataset's meta files against the shard scans: sqlite index, split and dataset.yaml.

``index.sqlite`` must agree with ``.info.json``; ``split.yaml`` must name only known shards and
samples and put every shard in a part; ``dataset.yaml``'s field map must read parts the samples
have.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from stoker.errors import ConfigError, StokerError
from stoker.format.brace import expand
from stoker.format.dataset_config import read_dataset_config
from stoker.format.lint.report import MAX_REPORTED, REPREPARE, Finding, LintReport, capped
from stoker.format.meta import (
    INDEX_SQLITE,
    META_DIR,
    DatasetInfo,
    SplitConfig,
    read_split_config,
)
from stoker.format.shard_scan import MAX_PARTS_REPORTED, ShardIndex
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.storage import Store


def check_sqlite(store: Store, info: DatasetInfo, report: LintReport) -> None:
    """index.sqlite (if any) has each shard's sample count and no duplicate key."""
    local = store.cached_local_path(INDEX_SQLITE)
    if local is None:
        return
    try:
        reader = SqliteIndexReader(local)
        try:
            counts, duplicates = reader.shard_counts(), reader.duplicate_keys(MAX_REPORTED)
        finally:
            reader.close()
    except sqlite3.Error as e:
        report.findings.append(
            Finding("error", f"the index cannot be read ({e}).", INDEX_SQLITE, hint=REPREPARE)
        )
        return
    for shard_id, (name, count) in enumerate(info.shard_counts.items()):
        if counts.get(shard_id, 0) != count:
            problem = (
                f"it has {counts.get(shard_id, 0)} samples of shard {name!r} (shard {shard_id}) "
                f"but .info.json says {count}."
            )
            report.findings.append(Finding("error", problem, INDEX_SQLITE, hint=REPREPARE))
    for key in duplicates:
        problem = "the sample key occurs more than once."
        report.findings.append(Finding("error", problem, INDEX_SQLITE, key, hint=REPREPARE))


def check_split(
    store: Store,
    info: DatasetInfo,
    name: str,
    scans: dict[str, ShardIndex],
    report: LintReport,
) -> None:
    """split.yaml parses, names only known shards and keys, and every shard is in a split."""
    where = f"{META_DIR}/{name}"
    try:
        split = read_split_config(store, name)
    except StokerError as e:
        report.findings.append(Finding.from_error(e, store))
        return
    try:
        report.findings.extend(_split_findings(split, info, scans, where))
    except ConfigError as e:  # unbalanced braces
        report.findings.append(Finding("error", e.problem, where, hint=e.hint))


def select_splits(
    store: Store, info: DatasetInfo, name: str, split_parts: list[str], report: LintReport
) -> DatasetInfo:
    """``info`` cut down to the shards of ``split_parts``; unknown parts become errors."""
    try:
        split = read_split_config(store, name)
    except StokerError:
        return info  # check_split reports it; scan everything meanwhile
    selected: set[str] = set()
    for part in split_parts:
        try:
            selected.update(split.shards(part))
        except ConfigError as e:
            report.findings.append(Finding("error", e.problem, f"{META_DIR}/{name}", hint=e.hint))
    counts = {k: v for k, v in info.shard_counts.items() if k in selected}
    return DatasetInfo(counts, info.writer)


def _split_findings(
    split: SplitConfig, info: DatasetInfo, scans: dict[str, ShardIndex], where: str
) -> list[Finding]:
    """Unknown shards, empty split parts, shards in no part and bad excludes."""
    findings: list[Finding] = []
    used: set[str] = set()
    for part, patterns in split.split_parts.items():
        shards = expand(patterns)
        used.update(shards)
        findings.extend(capped(_repeated_shards(shards, part, where), "repeated shards"))
        unknown = (s for s in shards if s not in info.shard_counts)
        findings.extend(capped(_unknown_shards(unknown, part, where), "unknown shards"))
        if not [s for s in split.shards(part) if s in info.shard_counts]:
            findings.append(Finding("warning", f"split part {part!r} has no shards.", where))
    unused = (
        Finding("warning", "the shard is in no split part, so it is never loaded.", shard)
        for shard in info.shard_counts
        if shard not in used
    )
    findings.extend(capped(unused, "shards in no split part"))
    findings.extend(capped(_check_excludes(split, info, scans, where), "bad excludes"))
    return findings


def _repeated_shards(names: list[str], part: str, where: str) -> Iterator[Finding]:
    seen: set[str] = set()
    for shard in names:
        if shard in seen:
            problem = (
                f"split part {part!r} lists shard {shard!r} more than once (its samples would "
                "be loaded twice per epoch; loading refuses it)."
            )
            hint = "List each shard once (check overlapping brace patterns)."
            yield Finding("error", problem, where, hint=hint)
        seen.add(shard)


def _unknown_shards(names: Iterator[str], part: str, where: str) -> Iterator[Finding]:
    for shard in names:
        problem = f"split part {part!r} names shard {shard!r}, which .info.json does not list."
        hint = "Fix the name, or prepare the dataset again if the shard was added."
        yield Finding("error", problem, where, hint=hint)


def _check_excludes(
    split: SplitConfig, info: DatasetInfo, scans: dict[str, ShardIndex], where: str
) -> Iterator[Finding]:
    """Warnings for excluded shards and samples that the dataset does not have."""
    samples = split.excluded_samples()
    entries = {f"{shard}/{key}" for shard, keys in samples.items() for key in keys}
    for entry in expand(split.exclude):
        if entry not in entries and entry not in info.shard_counts:
            yield Finding("warning", f"exclude names unknown shard {entry!r}.", where)
    for shard, keys in samples.items():
        if shard not in info.shard_counts:
            yield Finding("warning", f"exclude names unknown shard {shard!r}.", where)
        elif shard in scans:
            present = set(scans[shard].keys)
            for key in sorted(keys - present):
                problem = f"exclude names sample {key!r}, which shard {shard!r} does not have."
                yield Finding("warning", problem, where, key)


def check_dataset_yaml(
    store: Store, name: str, scans: dict[str, ShardIndex], report: LintReport
) -> None:
    """dataset.yaml (if any) is valid and its field map reads parts that the samples have."""
    path = f"{META_DIR}/{name}"
    if not store.exists(path):
        hint = (
            "Loading needs it: create it with `stoker prepare` (it asks for the sample type), "
            "or pass the name of an existing dataset config."
        )
        report.findings.append(Finding("error", f"{name} does not exist.", path, hint=hint))
        return
    try:
        config = read_dataset_config(store, name)
    except StokerError as e:
        report.findings.append(Finding.from_error(e, store))
        return
    if not config.field_map or not scans:
        return
    if any(len(scan.part_names) >= MAX_PARTS_REPORTED for scan in scans.values()):
        return  # too many distinct parts to tell what is missing
    parts = set[str]().union(*(scan.part_names for scan in scans.values()))
    for field_name, options in config.field_map.items():
        if not any(option.part in parts for option in options):
            spec = ",".join(option.part for option in options)
            problem = f"field {field_name!r} reads part {spec!r}, which no sample has."
            hint = f"Parts found in the shards: {', '.join(sorted(parts))}."
            report.findings.append(Finding("error", problem, path, hint=hint))
