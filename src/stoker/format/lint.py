"""``lint``: check a prepared dataset against its shards and report every problem found.

The shards are re-scanned (headers only, in parallel processes): the scan is the truth that the
``.tar.idx`` files, ``.info.json``, ``index.sqlite``, ``split.yaml`` and ``dataset.yaml`` are
compared with. Problems become :class:`Finding` values instead of exceptions, so one run lists
them all; only a path that is not a dataset at all raises.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from stoker.errors import ConfigError, StokerError, StorageError
from stoker.format.brace import expand
from stoker.format.dataset_config import read_dataset_config
from stoker.format.jsonl import index_jsonl, jsonl_index_name
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    DEFAULT_SPLIT_CONFIG,
    INDEX_SQLITE,
    META_DIR,
    DatasetInfo,
    SplitConfig,
    read_info,
    read_split_config,
)
from stoker.format.parallel import ordered_map
from stoker.format.shard_scan import MAX_PARTS_REPORTED, ShardIndex, scan_shard
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.format.tar import BLOCK
from stoker.format.tar_index import decode_offsets, tar_index_name
from stoker.storage import Store, open_store, split_location

Severity = Literal["error", "warning"]
#: At most this many findings of one repeated kind (duplicate keys, bad lines, ...) are listed.
MAX_REPORTED = 20
_REPREPARE = "Re-create the metadata with `stoker prepare --force-overwrite`."
_REINDEX = "Re-create the tar indexes with `stoker prepare --tar-index-only`."


@dataclass(frozen=True)
class Finding:
    """One problem: how bad, what, and where (file relative to the dataset, key, byte offset)."""

    severity: Severity
    problem: str
    path: str | None = None
    key: str | None = None
    offset: int | None = None
    hint: str | None = None

    @classmethod
    def from_error(cls, error: StokerError, store: Store) -> Finding:
        """The finding for an error raised by a reader, with its path made relative."""
        root = store.url("").rstrip("/") + "/"
        path = error.path
        if path is not None and path.startswith(root):
            path = path[len(root) :]
        return cls("error", error.problem, path, error.key, error.offset, error.hint)

    @property
    def message(self) -> str:
        """``shard.tar, sample 'k', byte offset N: problem. hint``."""
        error = StokerError(
            self.problem, path=self.path, key=self.key, offset=self.offset, hint=self.hint
        )
        return error.message


@dataclass
class LintReport:
    """Everything ``lint`` found; ``ok`` when there is no error (warnings are allowed)."""

    path: str
    #: ``webdataset`` or ``jsonl``.
    kind: str = "webdataset"
    shards_checked: int = 0
    samples_checked: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output, with the ``ok``/``errors``/``warnings`` summary."""
        return {**asdict(self), "ok": self.ok, "errors": self.errors, "warnings": self.warnings}


@dataclass
class ShardCheck:
    """What checking one shard found; made in a worker process."""

    name: str
    #: None when the shard could not be scanned.
    scan: ShardIndex | None
    findings: list[Finding]


def lint_dataset(
    path: str,
    *,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_yaml: str = DEFAULT_DATASET_YAML,
    progress: bool = False,
    num_workers: int | None = None,
) -> LintReport:
    """Check the prepared dataset at ``path`` (a folder of shards or a ``.jsonl`` file).

    Raises:
        StorageError: ``path`` does not exist or is not a prepared dataset.

    Example:
        >>> report = lint_dataset("/data/coco-wds")  # doctest: +SKIP
        >>> report.ok, [f.message for f in report.findings]  # doctest: +SKIP
        (True, [])
    """
    if path.endswith(".jsonl"):
        return lint_jsonl(path)
    store = open_store(path)
    if not store.is_dir(""):
        raise StorageError("no such folder.", path=path, hint="Pass the folder of a dataset.")
    if not store.is_dir(META_DIR):
        raise StorageError(
            "not a prepared dataset: there is no .nv-meta folder.",
            path=path,
            hint=f"Run `stoker prepare {path}` first.",
        )
    report = LintReport(path)
    try:
        info = read_info(store)
    except StokerError as e:
        report.findings.append(Finding.from_error(e, store))
        return report
    checks = _check_shards(store, info, report, num_workers, progress)
    _check_sqlite(store, info, report)
    _check_split(store, info, split_config, checks, report)
    _check_dataset_yaml(store, dataset_yaml, checks, report)
    return report


def _check_shards(
    store: Store, info: DatasetInfo, report: LintReport, num_workers: int | None, progress: bool
) -> dict[str, ShardIndex]:
    """Scan every shard and compare it with its index and .info.json; the scans by shard."""
    tasks = []
    for name, count in info.shard_counts.items():
        if store.exists(name):
            tasks.append((name, count))
        else:
            hint = "Restore the shard, or remove it from the dataset and prepare again."
            report.findings.append(Finding("error", "the shard does not exist.", name, hint=hint))
    scans: dict[str, ShardIndex] = {}
    with tqdm(total=len(tasks), desc="Checking shards", unit="shard", disable=not progress) as bar:
        for check in ordered_map(partial(check_shard, store), tasks, num_workers, len(tasks)):
            report.findings.extend(check.findings)
            if check.scan is not None:
                scans[check.name] = check.scan
                report.shards_checked += 1
                report.samples_checked += len(check.scan.keys)
            bar.update()
    report.findings.extend(_capped(_duplicate_keys(scans), "duplicate keys"))
    return scans


def check_shard(store: Store, task: tuple[str, int]) -> ShardCheck:
    """Scan shard ``task[0]`` and compare it with its ``.tar.idx`` and its expected count.

    A shard that cannot be scanned gets only that finding: its index cannot be judged until
    the shard itself is fixed.
    """
    name, expected = task
    try:
        scan = scan_shard(store, name)
    except StokerError as e:
        return ShardCheck(name, None, [Finding.from_error(e, store)])
    scan.parts = []  # not needed here: do not send them back to the main process
    findings: list[Finding] = []
    if len(scan.keys) != expected:
        problem = f"the shard has {len(scan.keys)} samples but .info.json says {expected}."
        findings.append(Finding("error", problem, name, hint=_REPREPARE))
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
        return Finding("error", f"the tar index {index} is missing.", name, hint=_REINDEX)
    offsets = decode_offsets(store.read_bytes(index), index)
    problem = index_structure_problem(offsets, expected, scan.size)
    if problem is None:
        problem = index_scan_problem(offsets, np.asarray(scan.offsets, dtype=np.uint64))
    if problem is None:
        return None
    entry, text, offset = problem
    key = scan.keys[entry] if entry is not None and entry < len(scan.keys) else None
    return Finding("error", f"{index} {text}", name, key, offset, _REINDEX)


#: (entry number or None, what is wrong, byte offset in the shard or None)
IndexProblem = tuple[int | None, str, int | None]


def index_structure_problem(
    offsets: npt.NDArray[np.uint64], expected: int, size: int
) -> IndexProblem | None:
    """The first way ``offsets`` cannot be the index of a shard of ``size`` bytes and
    ``expected`` samples: wrong length, not increasing, off a tar block, past the end."""
    if len(offsets) != expected + 1:
        return (
            None,
            (
                f"has {len(offsets)} entries but .info.json says {expected} samples "
                f"(expected {expected + 1} entries)."
            ),
            None,
        )
    values = offsets.astype(np.int64)
    checks = (
        (np.flatnonzero(np.diff(values) <= 0) + 1, "is not greater than the entry before it"),
        (np.flatnonzero(values % BLOCK), f"is not on a {BLOCK}-byte tar block boundary"),
        (np.flatnonzero((values > size) | (values < 0)), f"is past the end ({size} bytes)"),
    )
    for bad, text in checks:
        if len(bad):
            entry = int(bad[0])
            return entry, f"entry {entry} ({int(offsets[entry])}) {text}.", int(offsets[entry])
    return None


def index_scan_problem(
    offsets: npt.NDArray[np.uint64], real: npt.NDArray[np.uint64]
) -> IndexProblem | None:
    """The first entry where a shard's index disagrees with the offsets a scan found."""
    common = min(len(offsets), len(real))
    differ = np.flatnonzero(offsets[:common] != real[:common])
    if len(differ):
        entry = int(differ[0])
        what = "the file ends" if entry == len(real) - 1 else f"sample {entry} starts"
        text = f"entry {entry} is {int(offsets[entry])} but {what} at {int(real[entry])}."
        return entry, text, int(real[entry])
    if len(offsets) != len(real):
        entry = common - 1
        text = f"lists {len(offsets) - 1} samples but the file has {len(real) - 1}."
        return entry, text, int(real[entry])
    return None


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


def _capped(findings: Iterator[Finding], what: str) -> list[Finding]:
    """The first :data:`MAX_REPORTED` findings, plus one that counts the rest."""
    out: list[Finding] = []
    rest = 0
    for finding in findings:
        if len(out) < MAX_REPORTED:
            out.append(finding)
        else:
            rest += 1
    if rest:
        out.append(Finding(out[-1].severity, f"... and {rest} more {what} (not listed)."))
    return out


def _check_sqlite(store: Store, info: DatasetInfo, report: LintReport) -> None:
    """index.sqlite (if any) has each shard's sample count and no duplicate key."""
    local = store.local_path(INDEX_SQLITE)
    if local is None or not store.exists(INDEX_SQLITE):
        return
    try:
        reader = SqliteIndexReader(local)
        try:
            counts, duplicates = reader.shard_counts(), reader.duplicate_keys(MAX_REPORTED)
        finally:
            reader.close()
    except sqlite3.Error as e:
        report.findings.append(
            Finding("error", f"the index cannot be read ({e}).", INDEX_SQLITE, hint=_REPREPARE)
        )
        return
    for shard_id, (name, count) in enumerate(info.shard_counts.items()):
        if counts.get(shard_id, 0) != count:
            problem = (
                f"it has {counts.get(shard_id, 0)} samples of shard {name!r} (shard {shard_id}) "
                f"but .info.json says {count}."
            )
            report.findings.append(Finding("error", problem, INDEX_SQLITE, hint=_REPREPARE))
    for key in duplicates:
        problem = "the sample key occurs more than once."
        report.findings.append(Finding("error", problem, INDEX_SQLITE, key, hint=_REPREPARE))


def _check_split(
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


def _split_findings(
    split: SplitConfig, info: DatasetInfo, scans: dict[str, ShardIndex], where: str
) -> list[Finding]:
    """Unknown shards, empty split parts, shards in no part and bad excludes."""
    findings: list[Finding] = []
    used: set[str] = set()
    for part, patterns in split.split_parts.items():
        shards = expand(patterns)
        used.update(shards)
        unknown = (s for s in shards if s not in info.shard_counts)
        findings.extend(_capped(_unknown_shards(unknown, part, where), "unknown shards"))
        if not [s for s in split.shards(part) if s in info.shard_counts]:
            findings.append(Finding("warning", f"split part {part!r} has no shards.", where))
    unused = (
        Finding("warning", "the shard is in no split part, so it is never loaded.", shard)
        for shard in info.shard_counts
        if shard not in used
    )
    findings.extend(_capped(unused, "shards in no split part"))
    findings.extend(_capped(_check_excludes(split, info, scans, where), "bad excludes"))
    return findings


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


def _check_dataset_yaml(
    store: Store, name: str, scans: dict[str, ShardIndex], report: LintReport
) -> None:
    """dataset.yaml (if any) is valid and its field map reads parts that the samples have."""
    path = f"{META_DIR}/{name}"
    if not store.exists(path):
        if name != DEFAULT_DATASET_YAML:
            report.findings.append(Finding("error", f"{name} does not exist.", path))
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


def lint_jsonl(path: str) -> LintReport:
    """Check a JSONL file: every line is a JSON object and its ``.idx`` is up to date."""
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise StorageError("no such file.", path=path, hint="Check the path of the JSONL file.")
    report = LintReport(path, kind="jsonl")
    data = store.read_bytes(name)
    samples, bad_lines = _check_json_lines(name, data)
    report.samples_checked = samples
    report.findings.extend(_capped(bad_lines, "bad lines"))
    if not report.findings:  # a fresh index is only defined for a valid file
        report.findings.extend(_check_jsonl_index(store, name, data))
    return report


def _check_json_lines(name: str, data: bytes) -> tuple[int, Iterator[Finding]]:
    """The number of non-blank lines, and a finding for each that is not a JSON object."""
    samples, offset, bad = 0, 0, []
    for number, line in enumerate(io.BytesIO(data), start=1):
        text = line.strip()
        if text:
            samples += 1
            problem = _json_line_problem(text)
            if problem is not None:
                hint = "Each line of a JSONL dataset must be one JSON object {...}."
                bad.append(Finding("error", f"line {number} {problem}", name, None, offset, hint))
        offset += len(line)
    return samples, iter(bad)


def _json_line_problem(text: bytes) -> str | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return f"is not valid JSON: {e.msg} (column {e.colno})."
    except UnicodeDecodeError:
        return "is not valid UTF-8."
    return None if isinstance(value, dict) else "is not a JSON object."


def _check_jsonl_index(store: Store, name: str, data: bytes) -> list[Finding]:
    """The JSONL index exists and equals a fresh index of the file."""
    index = jsonl_index_name(name)
    hint = f"Index the file again (stale or missing index): `stoker prepare {store.url(name)}`."
    if not store.exists(index):
        return [Finding("error", f"the index {index} is missing.", name, hint=hint)]
    try:
        fresh = index_jsonl(data, name)
        stored = decode_offsets(store.read_bytes(index), index)
    except StokerError as e:
        return [Finding.from_error(e, store)]
    problem = index_scan_problem(stored, fresh)
    if problem is None:
        return []
    _, text, offset = problem
    return [Finding("error", f"{index} {text}", name, None, offset, hint)]
