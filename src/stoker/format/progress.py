"""Progress bars that suit where the output goes.

On a terminal: tqdm's bar with rate and ETA, redrawn in place. Elsewhere (a SLURM or CI log, a
file, a pipe): one plain line every ``STOKER_PROGRESS_INTERVAL`` seconds (default 30) and one at
the end, each a whole line with count, rate and ETA, and never a ``\\r`` frame.

Example:
    >>> for shard in progress_bar(["a.tar", "b.tar"], desc="Indexing shards", unit="shard"):
    ...     pass  # on stderr: a live bar, or "Indexing shards: 100%|###| 2/2 [00:00<00:00, ...]"
    >>> with progress_bar(total=3, desc="Packing", unit="sample", disable=True) as bar:
    ...     _ = bar.update(3)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

#: Seconds between plain progress lines when the output is not a terminal.
DEFAULT_INTERVAL_S = 30.0


class _Sink:
    """Swallows tqdm's own terminal control output (``\\r``, clearing, trailing newlines)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class PlainLineProgress(tqdm):  # type: ignore[type-arg]
    """A tqdm that prints whole lines (no ``\\r``, no cursor moves) at most every interval."""

    def __init__(self, *args: Any, out: Any, **kwargs: Any) -> None:
        self._out = out
        super().__init__(*args, file=_Sink(), **kwargs)  # type: ignore[call-overload]

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        text = self.__str__() if msg is None else msg
        if not text.strip():
            return  # tqdm clears a bar with an empty message: nothing to clear in a log
        self._out.write(text.rstrip() + "\n")
        self._out.flush()


def progress_bar(
    iterable: Iterable[T] | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str,
    disable: bool = False,
) -> tqdm[Any]:
    """A progress bar on stderr: a live bar on a terminal, periodic plain lines elsewhere."""
    if disable:
        return tqdm(iterable, total=total, desc=desc, unit=unit, disable=True)
    if sys.stderr.isatty():
        return tqdm(iterable, total=total, desc=desc, unit=unit, dynamic_ncols=True)
    interval = _interval()
    return PlainLineProgress(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        out=sys.stderr,
        ascii=True,
        ncols=100,
        mininterval=interval,
        maxinterval=interval,
        miniters=0,
    )


def _interval() -> float:
    raw = os.environ.get("STOKER_PROGRESS_INTERVAL", "")
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S
