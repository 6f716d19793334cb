"""The fenced code blocks of the project's Markdown pages, with the marks that say how to run them.

A block is run as written unless an HTML comment (invisible on the rendered page) on the line just
before its opening fence says otherwise:

- ``<!-- fragment: REASON -->``: a piece of a larger program (it names things the page leaves to
  the reader); a Python fragment is compiled, a bash fragment is checked with ``bash -n``.
- ``<!-- setup: NAME -->``: run after the named setup of ``tests/docs/setups.py`` has put the files
  the block expects into the working folder.
- ``<!-- output -->``: what the nearest code block above it that runs prints (its standard
  output), as the reader sees it; checked by :func:`output_matches`. ``...`` alone on a line
  stands for any lines (or none), inside a line for any text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^<!--\s*(fragment|setup|output)\s*(?::\s*(.*?))?\s*-->$")


@dataclass(frozen=True)
class Block:
    """One fenced code block."""

    path: Path
    #: 1-based line of the opening fence.
    line: int
    language: str
    code: str
    #: "run", "fragment", "setup" or "output".
    mark: str = "run"
    #: The fragment's reason or the setup's name.
    note: str = ""

    @property
    def id(self) -> str:
        return f"{self.path.name}:{self.line}"


def read_blocks(path: Path) -> list[Block]:
    """Every fenced block of the Markdown file ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, language = opening.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f"{path}:{i + 1}: the code block is never closed")
        mark, note = _mark_before(lines, i)
        code = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(path, i + 1, language.lower(), code, mark, note))
        i = end + 1
    return blocks


def _mark_before(lines: list[str], fence_index: int) -> tuple[str, str]:
    if fence_index == 0:
        return "run", ""
    found = _MARK.match(lines[fence_index - 1].strip())
    if found is None:
        return "run", ""
    return found.group(1), found.group(2) or ""


def output_matches(expected: str, printed: str) -> bool:
    """Whether ``printed`` is ``expected``, line by line (trailing spaces and blank lines at the
    ends aside), where a line ``...`` stands for any lines and ``...`` in a line for any text.

    >>> output_matches("a\\n...\\nz 1...", "a\\nb\\nc\\nz 12")
    True
    >>> output_matches("a\\nz", "a\\nb\\nz")
    False
    """
    pattern = []
    for line in expected.strip("\n").splitlines():
        line = line.rstrip()
        if line == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*?".join(re.escape(part) for part in line.split("...")) + r"[ \t]*\n")
    text = "\n".join(line.rstrip() for line in printed.strip("\n").splitlines()) + "\n"
    return re.fullmatch("".join(pattern), text) is not None
