"""Brace expansion and collapse of shard names, as ``split.yaml`` writes them.

``collapse(["s_000.tar", "s_001.tar", "s_002.tar"])`` gives ``["s_{000..002}.tar"]``, which
``expand`` (bash-style, via ``braceexpand``) turns back into the three names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import braceexpand

from stoker.errors import ConfigError

_NUMBER_RE = re.compile(r"^(.*?)(\d+)(\D*)$")


def expand(patterns: Iterable[str]) -> list[str]:
    """All names that the brace patterns stand for, in order."""
    names: list[str] = []
    for pattern in patterns:
        try:
            names.extend(braceexpand.braceexpand(pattern))
        except ValueError as e:  # unbalanced braces
            raise ConfigError(
                f"invalid brace pattern {pattern!r} ({e}).",
                hint="Balance the braces, or escape literal ones as \\{ and \\}.",
            ) from None
    return names


def collapse(names: list[str]) -> list[str]:
    """Shorter brace patterns for ``names`` that expand to exactly ``names``, in order.

    Runs of consecutive numbers with the same prefix, suffix and width become ``{a..b}``; names
    with braces of their own are escaped so that they expand to themselves.
    """
    out: list[str] = []
    run: tuple[str, str, int, int, int] | None = None  # prefix, suffix, width, first, last

    def flush() -> None:
        if run is None:
            return
        prefix, suffix, width, first, last = run
        if first == last:
            out.append(f"{_escape(prefix)}{first:0{width}d}{_escape(suffix)}")
        else:
            out.append(f"{_escape(prefix)}{{{first:0{width}d}..{last:0{width}d}}}{_escape(suffix)}")

    for name in names:
        match = _NUMBER_RE.match(name)
        if match is None:
            flush()
            run = None
            out.append(_escape(name))
            continue
        prefix, digits, suffix = match.groups()
        number = int(digits)
        if (
            run is not None
            and (run[0], run[1]) == (prefix, suffix)
            and number == run[4] + 1
            and f"{number:0{run[2]}d}" == digits
        ):
            run = (prefix, suffix, run[2], run[3], number)
        else:
            flush()
            run = (prefix, suffix, len(digits), number, number)
    flush()
    return out


def _escape(text: str) -> str:
    return re.sub(r"([{}\\,])", r"\\\1", text) if re.search(r"[{},\\]", text) else text
