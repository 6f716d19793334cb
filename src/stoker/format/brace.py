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
_RANGE_RE = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")

#: The most names that the patterns of one :func:`expand` call may stand for.
MAX_NAMES = 1_000_000


def count_bound(pattern: str) -> int:
    """An upper bound on the number of names ``pattern`` expands to, computed without expanding.

    Each ``{a..b[..step]}`` range multiplies by its length, each ``{x,y,...}`` group by its number
    of alternatives (nested groups are over-counted, never under-counted).

    Example:
        >>> count_bound("shard-{000..009}.tar")
        10
    """
    bound = 1
    stack: list[tuple[int, int]] = []  # (start index of the group's text, commas at its level)
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            stack.append((i + 1, 0))
        elif char == "," and stack:
            stack[-1] = (stack[-1][0], stack[-1][1] + 1)
        elif char == "}" and stack:
            start, commas = stack.pop()
            bound *= commas + 1 if commas else _range_length(pattern[start:i])
        i += 1
    return bound


def _range_length(body: str) -> int:
    match = _RANGE_RE.match(body)
    if match is None:
        return 1
    first, last, step = match.groups()
    if first.isalpha() != last.isalpha():
        return 1
    a, b = (ord(first), ord(last)) if first.isalpha() else (int(first), int(last))
    return abs(b - a) // max(abs(int(step or 1)), 1) + 1


def expand(patterns: Iterable[str]) -> list[str]:
    """All names that the brace patterns stand for, in order (at most :data:`MAX_NAMES`)."""
    names: list[str] = []
    for pattern in patterns:
        bound = count_bound(pattern)
        if len(names) + bound > MAX_NAMES:
            raise ConfigError(
                f"the brace pattern {pattern!r} stands for up to {bound:,} names; stoker expands "
                f"at most {MAX_NAMES:,} shard names at once.",
                hint="Check the range bounds (a typo such as {000000..999999999}?); list the "
                "shards that exist, e.g. by running `stoker prepare` again.",
            )
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
