"""Check a Megatron token dataset: the ``.idx`` is a sound MMIDIDX index of its ``.bin``.

The header (magic, version, dtype code), the file's size against the counts it declares, every
sequence inside the ``.bin``, and the document indices (within range, not decreasing), each
problem named with the file and the byte offset of the first bad entry.
"""

from __future__ import annotations

from stoker.errors import StokerError, StorageError
from stoker.format.binidx import TokenIndex, idx_name
from stoker.format.lint.report import Finding, LintReport
from stoker.storage import open_store, split_location


def lint_binidx(bin_path: str) -> LintReport:
    """The findings of the token dataset whose ``.bin`` is ``bin_path``.

    Example:
        >>> lint_binidx("corpus_text_document.bin").ok
        True
    """
    parent, name = split_location(bin_path)
    store = open_store(parent)
    report = LintReport(bin_path, kind="binidx")
    index_name = idx_name(name)
    for needed in (name, index_name):
        if not store.exists(needed):
            raise StorageError("no such file.", path=store.url(needed), hint="Check the path.")
    local = store.local_path(index_name) or store.cached_local_path(index_name)
    try:
        index = TokenIndex.load(local or "", store.url(index_name))
    except StokerError as e:
        report.findings.append(Finding.from_error(e, store))
        return report
    problems = index.check(store.size(name), store.url(index_name))
    report.findings.extend(Finding.from_error(e, store) for e in problems)
    report.shards_checked = 1
    report.samples_checked = len(index)
    return report
