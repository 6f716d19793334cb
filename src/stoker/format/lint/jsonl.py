"""Check a JSONL dataset: every non-blank line is a JSON object and its ``.idx`` is fresh.

The index is compared with one built anew from the file, and only when every line is valid
(a fresh index is only defined for a valid file). The file is read as a stream, twice at most,
never held whole.
"""

from __future__ import annotations

import functools
import itertools
import json
from typing import NamedTuple

from stoker.errors import StokerError, StorageError
from stoker.format.jsonl import CHUNK, MIB, index_jsonl_chunks, jsonl_index_name
from stoker.format.lint.offsets import index_scan_problem
from stoker.format.lint.report import MAX_REPORTED, Finding, LintReport, capped
from stoker.format.parallel import ordered_map
from stoker.format.progress import Progress
from stoker.format.tar_index import decode_offsets
from stoker.storage import Store, open_store, split_location

#: A JSONL file is checked in parts of about this many bytes, over worker processes.
PART_BYTES = 16 << 20
_HINT = "Each line of a JSONL dataset must be one JSON object {...}."


def lint_jsonl(path: str, *, progress: bool = False, num_workers: int | None = None) -> LintReport:
    """Check a JSONL file: every line is a JSON object and its ``.idx`` is up to date.

    The file is checked in parts of about :data:`PART_BYTES` (each starting at a line) over
    ``num_workers`` processes (default: the cores, at most 16); ``progress``: the parts
    checked, in MiB of the file, as :class:`Progress` shows them.
    """
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise StorageError("no such file.", path=path, hint="Check the path of the JSONL file.")
    report = LintReport(path, kind="jsonl")
    size = store.size(name)
    parts = _parts(store, name, size)
    bad: list[Finding] = []
    lines = bad_lines = 0
    with Progress(-(-size // MIB), "Checking lines", unit="MiB", enabled=progress) as bar:
        checked = ordered_map(_CheckPart(parent, name), parts, num_workers, len(parts))
        for (_, end), part in zip(parts, checked, strict=True):
            for number, problem, offset in part.problems[: MAX_REPORTED - len(bad)]:
                text = f"line {lines + number} {problem}"
                bad.append(Finding("error", text, name, None, offset, _HINT))
            lines += part.lines
            bad_lines += part.bad
            report.samples_checked += part.samples
            bar.update(-(-end // MIB) - bar.done)
    report.findings.extend(capped(iter(bad), "bad lines", bad_lines - len(bad)))
    if not report.findings:  # a fresh index is only defined for a valid file
        report.findings.extend(_check_jsonl_index(store, name))
    return report


def _parts(store: Store, name: str, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` byte ranges of about :data:`PART_BYTES` covering the file, each
    starting where a line starts."""
    cuts = [0]
    for at in range(PART_BYTES, size, PART_BYTES):
        cut = _line_start(store, name, max(at, cuts[-1]), size)
        if cuts[-1] < cut < size:
            cuts.append(cut)
    return list(itertools.pairwise([*cuts, size]))


def _line_start(store: Store, name: str, at: int, size: int) -> int:
    """Where the first line starting at or after ``at`` starts (``size`` if none does)."""
    at -= 1  # a line starts at ``at`` if the byte before it ends one
    while at < size:
        window = store.read_range(name, at, 1 << 16)
        found = window.find(b"\n")
        if found >= 0:
            return at + found + 1
        at += len(window) or size
    return size


class _Part(NamedTuple):
    lines: int
    samples: int
    bad: int  # lines that are not JSON objects
    problems: list[tuple[int, str, int]]  # the first few: (line in the part, problem, offset)


class _CheckPart:
    """Checks the lines of one part of a JSONL file (in a worker process)."""

    def __init__(self, parent: str, name: str) -> None:
        self.parent, self.name = parent, name

    def __call__(self, span: tuple[int, int]) -> _Part:
        start, end = span
        lines = samples = bad = 0
        problems: list[tuple[int, str, int]] = []
        with open_store(self.parent).open(self.name) as f:
            f.seek(start)
            offset = start
            while offset < end and (line := f.readline()):
                lines += 1
                text = line.strip()
                if text:
                    samples += 1
                    problem = _json_line_problem(text)
                    if problem is not None:
                        bad += 1
                        if len(problems) < MAX_REPORTED:
                            problems.append((lines, problem, offset))
                offset += len(line)
        return _Part(lines, samples, bad, problems)


def _json_line_problem(text: bytes) -> str | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        return f"is not valid JSON: {e.msg} (column {e.colno})."
    except UnicodeDecodeError:
        return "is not valid UTF-8."
    return None if isinstance(value, dict) else "is not a JSON object."


def _check_jsonl_index(store: Store, name: str) -> list[Finding]:
    """The JSONL index exists and equals a fresh index of the file."""
    index = jsonl_index_name(name)
    hint = f"Index the file again (stale or missing index): `stoker prepare {store.url(name)}`."
    if not store.exists(index):
        return [Finding("error", f"the index {index} is missing.", name, hint=hint)]
    try:
        with store.open(name) as f:
            fresh = index_jsonl_chunks(iter(functools.partial(f.read, CHUNK), b""), name)
        stored = decode_offsets(store.read_bytes(index), index)
    except StokerError as e:
        return [Finding.from_error(e, store)]
    problem = index_scan_problem(stored, fresh)
    if problem is None:
        return []
    _, text, offset = problem
    return [Finding("error", f"{index} {text}", name, None, offset, hint)]
