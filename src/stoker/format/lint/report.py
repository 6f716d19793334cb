"""What ``lint`` reports: :class:`Finding` (one problem, where) and :class:`LintReport` (all).

Problems are values, not exceptions, so one run lists them all; :func:`capped` keeps a repeated
kind of problem (duplicate keys, bad lines, ...) to :data:`MAX_REPORTED` findings plus a count.
The hints shared by several checks live here too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from stoker.errors import StokerError
from stoker.storage import Store

Severity = Literal["error", "warning"]
#: At most this many findings of one repeated kind (duplicate keys, bad lines, ...) are listed.
MAX_REPORTED = 20
REPREPARE = "Re-create the metadata with `stoker prepare --force-overwrite`."
REINDEX = "Re-create the tar indexes with `stoker prepare --tar-index-only`."


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
    #: Samples decoded as the loader would (``stoker lint`` without ``--no-decode``).
    samples_decoded: int = 0
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


def capped(findings: Iterator[Finding], what: str, unlisted: int = 0) -> list[Finding]:
    """The first :data:`MAX_REPORTED` findings, plus one that counts the rest (and
    ``unlisted`` more that were only counted)."""
    out: list[Finding] = []
    rest = unlisted
    for finding in findings:
        if len(out) < MAX_REPORTED:
            out.append(finding)
        else:
            rest += 1
    if rest:
        out.append(Finding(out[-1].severity, f"... and {rest} more {what} (not listed)."))
    return out
