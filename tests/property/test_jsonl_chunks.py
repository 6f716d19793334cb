"""Hypothesis properties of JSONL indexing in pieces: the offsets, and the first error, do not
depend on where the file is cut, and equal a plain line-by-line reading of the rules."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.errors import FormatError
from stoker.format.jsonl import index_jsonl, index_jsonl_chunks

LINES = ['{"a": 1}', "", "  ", ' {"b": [2]} ', '{"c": "é"}\r', "\t", "{}", "oops", "{x", "\r"]


def outcome(index: Callable[[], Sequence[int]]) -> tuple[str, object]:
    try:
        return "ok", [int(offset) for offset in index()]
    except FormatError as e:
        return "error", (e.problem, e.offset)


def line_by_line(data: bytes) -> list[int]:
    """The rules, one line at a time: blank lines are skipped, any other line must be
    ``{...}`` once stripped; the first sample starts at 0, the file's size ends the list."""
    starts, at = [], 0
    for number, line in enumerate(data.split(b"\n"), 1):
        text = line.strip()
        if text:
            if not (text.startswith(b"{") and text.endswith(b"}")):
                raise FormatError(f"line {number} is not a JSON object ({text[:40]!r}).", offset=at)
            starts.append(at)
        at += len(line) + 1
    if not data:
        raise FormatError("empty JSONL file.")
    if not starts:
        raise FormatError("the JSONL file has no samples (only blank lines).")
    return [0, *starts[1:], len(data)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(LINES), max_size=12),
    st.booleans(),
    st.lists(st.integers(0, 120), max_size=8),
)
def test_indexing_in_pieces_equals_indexing_whole_and_the_rules(
    lines: list[str], final_newline: bool, cuts: list[int]
) -> None:
    data = "\n".join(lines).encode() + (b"\n" if final_newline and lines else b"")
    bounds = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    whole = outcome(lambda: index_jsonl(data, "t.jsonl"))
    assert outcome(lambda: index_jsonl_chunks(pieces, "t.jsonl")) == whole
    assert outcome(lambda: line_by_line(data)) == whole
