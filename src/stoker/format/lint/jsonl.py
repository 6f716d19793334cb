"""Check a JSONL dataset: every non-blank line is a JSON object and its ``.idx`` is fresh.

The index is compared with one built anew from the file, and only when every line is valid
(a fresh index is only defined for a valid file). The file is read as a stream, twice at most,
never held whole.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator
from contextlib import closing

from stoker.errors import StokerError, StorageError
from stoker.format.jsonl import CHUNK, MIB, index_jsonl_chunks, jsonl_index_name
from stoker.format.lint.offsets import index_scan_problem
from stoker.format.lint.report import Finding, LintReport, capped
from stoker.format.progress import Progress
from stoker.format.tar_index import decode_offsets
from stoker.storage import Store, open_store, split_location


def lint_jsonl(path: str, *, progress: bool = False) -> LintReport:
    """Check a JSONL file: every line is a JSON object and its ``.idx`` is up to date
    (``progress``: the lines checked, in MiB of the file, as :class:`Progress` shows them)."""
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise StorageError("no such file.", path=path, hint="Check the path of the JSONL file.")
    report = LintReport(path, kind="jsonl")
    bar = Progress(-(-store.size(name) // MIB), "Checking lines", unit="MiB", enabled=progress)
    with store.open(name) as f, closing(bar):
        samples, bad_lines = _check_json_lines(name, f, bar)
    report.samples_checked = samples
    report.findings.extend(capped(bad_lines, "bad lines"))
    if not report.findings:  # a fresh index is only defined for a valid file
        report.findings.extend(_check_jsonl_index(store, name))
    return report


def _check_json_lines(
    name: str, lines: Iterable[bytes], bar: Progress
) -> tuple[int, Iterator[Finding]]:
    """The number of non-blank lines, and a finding for each that is not a JSON object."""
    samples, offset, bad, shown = 0, 0, [], MIB
    for number, line in enumerate(lines, start=1):
        if offset >= shown:  # whole MiB checked so far
            bar.update(offset // MIB - bar.done)
            shown = (offset // MIB + 1) * MIB
        text = line.strip()
        if text:
            samples += 1
            problem = _json_line_problem(text)
            if problem is not None:
                hint = "Each line of a JSONL dataset must be one JSON object {...}."
                bad.append(Finding("error", f"line {number} {problem}", name, None, offset, hint))
        offset += len(line)
    bar.update(-(-offset // MIB) - bar.done)
    return samples, iter(bad)


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
