"""``lint``: check a prepared dataset against its shards and report every problem found.

The shards are re-scanned (headers only, in parallel processes): the scan is the truth that the
``.tar.idx`` files, ``.info.json``, ``index.sqlite``, ``split.yaml`` and ``dataset.yaml`` are
compared with. Problems become :class:`Finding` values instead of exceptions, so one run lists
them all; only a path that is not a dataset at all raises.
"""

from __future__ import annotations

from stoker.errors import StokerError, StorageError
from stoker.format.binidx import token_dataset
from stoker.format.lint.binidx import lint_binidx
from stoker.format.lint.jsonl import lint_jsonl
from stoker.format.lint.meta import check_dataset_yaml, check_split, check_sqlite, select_splits
from stoker.format.lint.offsets import IndexProblem, index_scan_problem, index_structure_problem
from stoker.format.lint.parquet import lint_parquet
from stoker.format.lint.report import MAX_REPORTED, Finding, LintReport, Severity
from stoker.format.lint.shards import ShardCheck, check_shard, check_shards
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG, META_DIR, read_info
from stoker.format.parquet import is_parquet_dataset
from stoker.storage import open_store

__all__ = [
    "MAX_REPORTED",
    "Finding",
    "IndexProblem",
    "LintReport",
    "Severity",
    "ShardCheck",
    "check_shard",
    "index_scan_problem",
    "index_structure_problem",
    "lint_dataset",
    "lint_jsonl",
]


def lint_dataset(
    path: str,
    *,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_yaml: str = DEFAULT_DATASET_YAML,
    progress: bool = False,
    num_workers: int | None = None,
    split_parts: list[str] | None = None,
) -> LintReport:
    """Check the prepared dataset at ``path`` (a folder of shards or a ``.jsonl`` file).

    With ``split_parts`` (Energon's ``--split-parts``), only the shards of those split parts
    are scanned; a split part that ``split.yaml`` does not have is an error.

    Raises:
        StorageError: ``path`` does not exist or is not a prepared dataset.

    Example:
        >>> report = lint_dataset("coco-wds")
        >>> report.ok, [f.message for f in report.findings]
        (True, [])
    """
    if path.endswith(".jsonl"):
        return lint_jsonl(path, progress=progress, num_workers=num_workers)
    if (bin_path := token_dataset(path, prefix=False)) is not None:
        return lint_binidx(bin_path)
    store = open_store(path)
    if not store.is_dir(""):
        if (bin_path := token_dataset(path)) is not None:  # a .bin/.idx prefix
            return lint_binidx(bin_path)
        raise StorageError("no such folder.", path=path, hint="Pass the folder of a dataset.")
    if is_parquet_dataset(store):
        return lint_parquet(store, path)
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
    scanned = (
        info
        if split_parts is None
        else select_splits(store, info, split_config, split_parts, report)
    )
    checks = check_shards(store, scanned, report, num_workers, progress)
    check_sqlite(store, info, report)
    check_split(store, info, split_config, checks, report)
    check_dataset_yaml(store, dataset_yaml, checks, report)
    return report
