"""The MMIDIDX index reader: every dtype code megatron-core writes, multimodal indexes, and a
clear error (file, offset) for each way an index can be damaged."""

from __future__ import annotations

import numpy as np
import pytest

from stoker.errors import FormatError
from stoker.format.binidx import DTYPES, HEADER, TokenIndex, bin_location, encode_index


@pytest.mark.parametrize("code", sorted(DTYPES))
def test_every_dtype_code_parses(code: int) -> None:
    dtype = DTYPES[code]
    index = TokenIndex.parse(encode_index(dtype, [2, 0, 5], [0, 2, 3]), "x.idx")
    assert index.dtype == dtype and len(index) == 3 and index.modes is None
    assert index.pointers.tolist() == [0, 2 * dtype.itemsize, 2 * dtype.itemsize]
    starts, ends = index.byte_ranges(np.array([2, 0]))
    assert starts.tolist() == [2 * dtype.itemsize, 0]
    assert ends.tolist() == [7 * dtype.itemsize, 2 * dtype.itemsize]
    assert index.check(7 * dtype.itemsize, "x.idx") == []


def test_multimodal_index_has_sequence_modes() -> None:
    data = encode_index(np.dtype(np.int32), [1, 1], [0, 2]) + bytes([0, 1])
    modes = TokenIndex.parse(data, "m.idx").modes
    assert modes is not None and modes.tolist() == [0, 1]


@pytest.mark.parametrize(
    ("damage", "problem", "offset"),
    [
        (lambda d: b"NOTANIDX\x00" + d[9:], "not a Megatron MMIDIDX index", 0),
        (lambda d: d[:9] + (2).to_bytes(8, "little") + d[17:], "version 2", 9),
        (lambda d: d[:17] + bytes([42]) + d[18:], "unknown dtype code 42", 17),
        (lambda d: d[:-3], "needs", HEADER.size + 3 * 12 + 4 * 8 - 3),
        (lambda d: d[:10], "shorter than its 34-byte header", 0),
    ],
)
def test_a_damaged_header_or_size_is_named_with_its_offset(
    damage: object, problem: str, offset: int
) -> None:
    data = damage(encode_index(np.dtype(np.uint16), [1, 2, 3], [0, 1, 2, 3]))  # type: ignore[operator]
    with pytest.raises(FormatError, match=problem) as e:
        TokenIndex.parse(data, "d.idx")
    assert e.value.path == "d.idx" and e.value.offset == offset


def test_check_finds_sequences_outside_the_bin_and_bad_document_indices() -> None:
    index = TokenIndex.parse(encode_index(np.dtype(np.int32), [2, 2], [0, 2, 1]), "c.idx")
    problems = index.check(12, "c.idx")  # the second sequence ends at byte 16
    messages = [p.problem for p in problems]
    assert any("outside the 12-byte .bin" in m for m in messages)
    assert any("document indices decrease" in m for m in messages)
    outside = next(p for p in problems if "outside" in p.problem)
    assert outside.offset == HEADER.size + 2 * 4 + 8  # the second pointer


def test_bin_location_of_names() -> None:
    assert bin_location("s3://b/corpus.idx") == "s3://b/corpus.bin"
    assert bin_location("/d/x.jsonl.idx") is None and bin_location("/d/x.tar.idx") is None
    assert bin_location("/d/corpus", lambda name: True) == "/d/corpus.bin"
    assert bin_location("/d/corpus", lambda name: name.endswith(".bin")) is None
