"""What ``prepare-media`` did: the report the CLI prints (or writes as ``--json``)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: How many unreadable files a report lists by name (all are counted).
MAX_FAILURES_LISTED = 20


@dataclass
class MediaReport:
    """What ``prepare-media`` did, for the CLI to print (or ``--json``)."""

    path: str
    strategy: str
    shards: int = 0
    files: int = 0
    failed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
