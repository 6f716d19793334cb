"""Small samples: local reads in coalesced blocks, SourceInfo's compact pickles, the text
decoders' fast path."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import stoker.pipeline.read as read_module
from stoker.errors import CorruptShardError, SampleError
from stoker.format.jsonl import prepare_jsonl
from stoker.model.samples import SourceInfo
from stoker.pipeline.decode import SampleDecoder, register_decoder
from stoker.pipeline.local_blocks import KEEP_HINTS, LocalBlocks
from stoker.pipeline.read import ShardReader
from stoker.storage import open_store


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps({"i": i, "text": "x" * (i % 7)}) + "\n" for i in range(50)))
    prepare_jsonl(str(path))
    return path


def reader_of(path: Path) -> ShardReader:
    return ShardReader(open_store(str(path.parent)), [path.name], jsonl=True)


def test_blocks_find_ranges_inside_kept_blocks_only() -> None:
    blocks = LocalBlocks()
    blocks.add({"a": [(0, 4, b"abcd"), (10, 14, b"klmn")]})
    assert blocks.take("a", 1, 3) == b"bc"
    assert blocks.take("a", 10, 14) == b"klmn"
    assert blocks.take("a", 3, 11) is None  # spans a gap
    assert blocks.take("a", 5, 6) is None
    assert blocks.take("b", 0, 1) is None
    blocks.add({"a": [(0, 4, b"ab")]})  # a short read (truncated file) is never served
    assert blocks.take("a", 0, 1) == b"a"  # ... from the older hint, which has all of it
    for _ in range(KEEP_HINTS):
        blocks.add({})
    assert blocks.take("a", 0, 1) is None  # hints older than the last KEEP_HINTS are gone


def test_blocks_serve_runs_from_the_last_block_and_forget_it_with_its_hint() -> None:
    blocks = LocalBlocks()
    blocks.add({"a": [(0, 8, b"abcdefgh")], "b": [(0, 2, b"xy")]})
    assert [blocks.take("a", i, i + 2) for i in (0, 2, 4, 6)] == [b"ab", b"cd", b"ef", b"gh"]
    assert blocks.take("b", 0, 2) == b"xy" and blocks.take("a", 6, 9) is None
    assert blocks.take("a", 1, 2) == b"b"  # back to another block than the last
    for _ in range(KEEP_HINTS):
        blocks.add({})
    assert blocks.take("a", 1, 2) is None  # not served from the remembered block


def test_blocks_look_at_the_older_hint_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stream reads the older hint's samples while the newer one (its next block) is read
    # ahead: a run held whole by the older hint is found with one hint's arrays.
    blocks = LocalBlocks()
    older, newer = (0, 8, b"abcdefgh"), (4, 12, b"efghijkl")
    blocks.add({"a": [older]})
    blocks.add({"a": [newer]})
    looked_at = []
    arrays = blocks._arrays
    monkeypatch.setattr(blocks, "_arrays", lambda *a: looked_at.append(a[2]) or arrays(*a))
    starts = np.array([0, 2, 5], np.int64)
    assert blocks.locate("a", starts, starts + 2) == [older] * 3
    assert len(looked_at) == 1
    assert blocks.block("a", 5, 7) == older and blocks.take("a", 9, 12) == b"jkl"


def test_hinted_lines_are_read_ahead_in_one_block(jsonl: Path) -> None:
    expected = [s.parts["json"] for s in map(reader_of(jsonl).read, [0] * 50, range(50))]
    reader = reader_of(jsonl)
    order = np.array([7, 3, 4, 5, 30, 31, 49], dtype=np.int64)
    reader.prefetch(np.zeros(len(order), np.int64), order)
    with open(jsonl, "r+b") as f:  # what the reader returns now comes from its block
        f.truncate(0)
    got = [reader.read(0, i) for i in order.tolist()]
    assert [s.parts["json"] for s in got] == [expected[i] for i in order.tolist()]
    assert [s.key for s in got] == [str(i) for i in order.tolist()]
    assert reader.read(0, 10).parts["json"] == expected[10]  # in the gap read with the block
    with pytest.raises(CorruptShardError, match="ended early"):
        reader_of(jsonl).read(0, 3)  # no hint: read from the (now empty) file
    reader.close()


def test_hints_over_the_budget_are_not_held(jsonl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read_module, "HINT_BUDGET", 16)
    reader = reader_of(jsonl)
    reader.prefetch(np.zeros(3, np.int64), np.arange(3, dtype=np.int64))
    with open(jsonl, "r+b") as f:
        f.truncate(0)
    with pytest.raises(CorruptShardError):
        reader.read(0, 0)
    reader.close()


def test_source_info_pickles_compactly_and_round_trips() -> None:
    info = SourceInfo(dataset_path="/d", index=7, shard_name="s.tar", file_names=("7.txt",))
    data = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    assert type(back) is SourceInfo and back == info
    assert b"file_names" not in data  # fields by position, not a state dict of names


def test_text_parts_decode_on_the_fast_path_and_fail_as_before() -> None:
    decoder = SampleDecoder()
    assert decoder.decode("k", {"json": b'{"a": [1]}', "txt": b"hi", "cls": b"7"}) == {
        "json": {"a": [1]}, "txt": "hi", "cls": 7,
    }  # fmt: skip
    with pytest.raises(SampleError, match="cannot decode the part as 'json'") as info:
        decoder.decode_part("k7", "json", b"{not json")
    assert info.value.key == "k7" and info.value.part == "json"
    with pytest.raises(SampleError, match="as 'cls'"):
        decoder.decode_part("k", "cls", b"x")


def test_a_re_registered_text_decoder_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import stoker.pipeline.decode as decode_module

    monkeypatch.setattr(decode_module, "_DECODERS", dict(decode_module._DECODERS))
    register_decoder("txt", lambda ext, data, decoder: data.upper())
    assert SampleDecoder().decode_part("k", "txt", b"ab") == b"AB"


@pytest.mark.parametrize(
    "data",
    [b'{"a": "\xc3\xa9"}', b' {"a": 1}\n', b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16"),
     b"NaN", b"[1.5, 2e3, null]", b'"\xff"'],
)  # fmt: skip
def test_json_parts_decode_as_json_loads_does(data: bytes) -> None:
    try:
        expected: object = json.loads(data)
    except ValueError as e:  # the same failure, as a SampleError naming the part
        with pytest.raises(SampleError, match=type(e).__name__):
            SampleDecoder().decode("k", {"json": data})
        return
    got = SampleDecoder().decode("k", {"json": data})["json"]
    assert got == expected or (got != got and expected != expected)  # NaN


def test_json_with_extra_data_fails_as_before() -> None:
    with pytest.raises(SampleError, match="Extra data"):
        SampleDecoder().decode("k", {"json": b"[1, 2] x"})


def test_fast_made_source_infos_and_positions_equal_constructed_ones() -> None:
    from stoker.model.source_info import source_info
    from stoker.pipeline.refs import Position, position

    info = SourceInfo(dataset_path="/d", index=7, shard_name="s.tar", file_names=("7.txt",))
    fast = source_info("/d", 7, "s.tar", ("7.txt",))
    assert fast == info and hash(fast) == hash(info) and repr(fast) == repr(info)
    assert pickle.loads(pickle.dumps(fast)) == info
    with pytest.raises(AttributeError):
        fast.index = 8  # type: ignore[misc]  # still frozen
    made = position((3, 1), 2)
    assert made == Position((3, 1), 2) and hash(made) == hash(Position((3, 1), 2))
    assert made.to_list() == [3, 1, 2]
