"""Check the shards of a dataset: re-scan each, compare it with its ``.tar.idx`` and count.

The scans run in parallel processes (:func:`check_shard` is the unit of work); their results are
the truth the other checks compare the metadata with. Sample keys must also be unique across
shards.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from stoker.errors import StokerError
from stoker.format.fingerprints import FINGERPRINTS, read_fingerprints
from stoker.format.lint.offsets import index_scan_problem, index_structure_problem
from stoker.format.lint.report import REINDEX, REPREPARE, Finding, LintReport, capped
from stoker.format.meta import DatasetInfo
from stoker.format.parallel import ordered_map
from stoker.format.progress import Progress
from stoker.format.shard_scan import ShardIndex, scan_shard
from stoker.format.tar_index import decode_offsets, tar_index_name
from stoker.storage import Store


@dataclass
class ShardCheck:
    """What checking one shard found; made in a worker process."""

    name: str
    #: None when the shard could not be scanned.
    scan: ShardIndex | None
    findings: list[Finding]


def check_shards(
    store: Store, info: DatasetInfo, report: LintReport, num_workers: int | None, progress: bool
) -> dict[str, ShardIndex]:
    """Scan every shard and compare it with its index and .info.json; the scans by shard."""
    tasks = []
    fingerprints = read_fingerprints(store)
    for name, count in info.shard_counts.items():
        if store.exists(name):
            tasks.append((name, count, fingerprints.get(name)))
        else:
            hint = "Restore the shard, or remove it from the dataset and prepare again."
            report.findings.append(Finding("error", "the shard does not exist.", name, hint=hint))
    scans: dict[str, ShardIndex] = {}
    with Progress(len(tasks), "Checking shards", enabled=progress) as bar:
        for check in ordered_map(partial(check_shard, store), tasks, num_workers, len(tasks)):
            report.findings.extend(check.findings)
            if check.scan is not None:
                scans[check.name] = check.scan
                report.shards_checked += 1
                report.samples_checked += len(check.scan.keys)
            bar.update()
    report.findings.extend(capped(_duplicate_keys(scans), "duplicate keys"))
    return scans


def check_shard(store: Store, task: tuple[str, int, str | None]) -> ShardCheck:
    """Scan shard ``name`` and compare it with its ``.tar.idx``, its expected count and the
    fingerprint ``prepare`` stored (``task`` is ``(name, count, fingerprint or None)``).

    A shard that cannot be scanned gets only that finding: its index cannot be judged until
    the shard itself is fixed.
    """
    name, expected, fingerprint = task
    try:
        scan = scan_shard(store, name)
    except StokerError as e:
        return ShardCheck(name, None, [Finding.from_error(e, store)])
    scan.parts = []  # not needed here: do not send them back to the main process
    findings: list[Finding] = []
    if fingerprint is not None and fingerprint != scan.fingerprint:
        problem = (
            "the shard is not the one that was prepared (its size or first/last sample "
            f"headers changed: {FINGERPRINTS} has {fingerprint!r}, the shard is "
            f"{scan.fingerprint!r}); shards swapped or replaced?"
        )
        hint = "Put the original shard back, or prepare the dataset again if it changed."
        findings.append(Finding("error", problem, name, scan.keys[0], 0, hint))
    if len(scan.keys) != expected:
        problem = f"the shard has {len(scan.keys)} samples but .info.json says {expected}."
        findings.append(Finding("error", problem, name, hint=REPREPARE))
    try:
        finding = _check_tar_index(store, expected, scan)
    except StokerError as e:
        finding = Finding.from_error(e, store)
    if finding is not None:
        findings.append(finding)
    return ShardCheck(name, scan, findings)


def _check_tar_index(store: Store, expected: int, scan: ShardIndex) -> Finding | None:
    """The first problem of a shard's ``.tar.idx``: its structure first, then vs the scan."""
    name, index = scan.name, tar_index_name(scan.name)
    if not store.exists(index):
        return Finding("error", f"the tar index {index} is missing.", name, hint=REINDEX)
    offsets = decode_offsets(store.read_bytes(index), index)
    problem = index_structure_problem(offsets, expected, scan.size)
    if problem is None:
        problem = index_scan_problem(offsets, np.asarray(scan.offsets, dtype=np.uint64))
    if problem is None:
        return None
    entry, text, offset = problem
    key = scan.keys[entry] if entry is not None and entry < len(scan.keys) else None
    return Finding("error", f"{index} {text}", name, key, offset, REINDEX)


def _duplicate_keys(scans: dict[str, ShardIndex]) -> Iterator[Finding]:
    """A finding for each sample key that occurs in more than one shard."""
    owner: dict[str, str] = {}
    for name, scan in scans.items():
        for key, offset in zip(scan.keys, scan.offsets, strict=False):
            first = owner.setdefault(key, name)
            if first != name:
                problem = f"duplicate sample key: it also occurs in shard {first!r}."
                hint = "Sample keys must be unique in a dataset; re-shard with `stoker pack`."
                yield Finding("error", problem, name, key, offset, hint)
