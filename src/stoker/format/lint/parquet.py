"""``stoker lint`` of a Parquet folder: every file's footer and every row group read whole.

A file whose footer cannot be read, or a row group that cannot be decoded, is named with the
file and the byte offset of the row group's first column chunk; files whose columns differ from
the first file's are named too.
"""

from __future__ import annotations

from stoker.errors import StokerError
from stoker.format.lint.report import Finding, LintReport
from stoker.format.parquet import ParquetFile, parquet_names
from stoker.storage import Store


def lint_parquet(store: Store, path: str) -> LintReport:
    """Read every row group of every Parquet file of the folder; report what fails."""
    report = LintReport(path, kind="parquet")
    columns: list[str] | None = None
    for name in parquet_names(store):
        try:
            file = ParquetFile(store, name)
        except StokerError as e:
            report.findings.append(Finding.from_error(e, store))
            continue
        try:
            names = list(file.file.schema_arrow.names)
            if columns is None:
                columns = names
            elif names != columns:
                report.findings.append(
                    Finding(
                        "error",
                        f"the file's columns {names} differ from the first file's {columns}.",
                        name,
                        hint="Every Parquet file of a split must have the same columns.",
                    )
                )
            for group in range(len(file.group_starts) - 1):
                try:
                    rows = file.read_group(group, None).num_rows
                except StokerError as e:
                    report.findings.append(Finding.from_error(e, store))
                    continue
                report.samples_checked += rows
        finally:
            file.close()
        report.shards_checked += 1
    return report
