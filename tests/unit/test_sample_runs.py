"""Samples read and built in runs (ShardReader.read_run, SampleBuilder.assemble_run) are the
samples read and built one by one, failures included; the helpers of that path (block lookup,
coalescing, the stage clock's charge, basic_sample_keys) agree with their plain versions."""

from __future__ import annotations

import collections
import dataclasses
import json
import mmap
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from stoker import (
    Cooker,
    DefaultTaskEncoder,
    ErrorPolicy,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_loader,
    get_train_dataset,
)
from stoker.errors import ConfigError, FormatError, SampleError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.model.samples import CrudeSample
from stoker.model.source_info import source_info
from stoker.pipeline import read as read_module
from stoker.pipeline import read_tar, stage_clock
from stoker.pipeline.batching import restore_key_of
from stoker.pipeline.coalesce import coalesce, sorted_unique
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.local_blocks import LocalBlocks
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.stage_clock import COOK, DECODE, READ, StageClock
from stoker.runtime import line_runs
from stoker.runtime.build import SampleBuilder
from stoker.runtime.line_runs import scanned_lines
from stoker.runtime.plain_runs import plain_outputs
from stoker.runtime.sample_encoding import encoded_key
from stoker.sources.load import load_source
from tests.conftest import ManualClock, make_val_texts

YAMLS = {
    "typed, plain fields": make_dataset_yaml("TextSample", {"text": "txt"}),
    "typed, item path": make_dataset_yaml("TextSample", {"text": "json[i]"}),
    "crude": make_dataset_yaml("CrudeWebdataset"),
}


def jsonl_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    prepare_jsonl(str(path))
    return path


def as_fields(sample: Any) -> tuple[type, dict[str, Any]]:
    """A sample's type and contents (dicts and dataclasses alike), for comparisons."""
    if isinstance(sample, dict):
        return type(sample), dict(sample)
    names = [f.name for f in dataclasses.fields(sample)]
    return type(sample), {name: getattr(sample, name) for name in names}


def one_by_one(builder: SampleBuilder, reader: Any, pairs: list[tuple[int, int]]) -> list[Any]:
    raws = [reader.read(s, i) for s, i in pairs]
    return [as_fields(builder.assemble(raw, ref)) for ref, raw in enumerate(raws)]


@pytest.mark.parametrize("kind", list(YAMLS))
def test_tar_runs_equal_one_by_one_reads_and_builds(tmp_path: Path, kind: str) -> None:
    root = make_val_texts(tmp_path / "d", shards=3, per_shard=5, dataset_yaml=YAMLS[kind])
    source = load_source(str(root), split_part="val")
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    assert builder.bulk and reader.local
    pairs = [(s, i) for s in range(3) for i in range(5)]
    random.Random(0).shuffle(pairs)
    raws, error = reader.read_run([s for s, _ in pairs], [i for _, i in pairs])
    assert error is None and raws == [reader.read(s, i) for s, i in pairs]
    samples, failed = builder.assemble_run(raws, list(range(len(raws))))
    assert failed is None
    assert [as_fields(s) for s in samples] == one_by_one(builder, reader, pairs)
    assert (builder.plain_fields is not None) == (kind == "typed, plain fields")


def test_jsonl_runs_equal_one_by_one_and_stop_at_the_first_failure(tmp_path: Path) -> None:
    lines = [json.dumps({"i": i, "t": "é" * i}) for i in range(40)]
    lines[25] = '{"i": 25, broken}'
    source = load_source(str(jsonl_file(tmp_path, lines)))
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    indices = [3, 1, 30, 2, 25, 7]
    reader.prefetch(np.zeros(len(indices), np.int64), np.array(indices, np.int64))
    raws, error = reader.read_run([0] * len(indices), indices)
    assert error is None and raws == [reader.read(0, i) for i in indices]
    samples, failed = builder.assemble_run(raws, indices)
    pairs = [(0, i) for i in indices[:4]]
    assert [as_fields(s) for s in samples] == [
        as_fields(builder.assemble(reader.read(s, i), i)) for s, i in pairs
    ]
    with pytest.raises(SampleError) as expected:
        builder.assemble(raws[4], 25)
    assert isinstance(failed, SampleError) and str(failed) == str(expected.value)
    # A line outside the index: the lines before it, then the error read() gives.
    raws, error = reader.read_run([0, 0, 0], [5, 40, 6])
    with pytest.raises(FormatError) as expected_read:
        reader.read(0, 40)
    assert raws == [reader.read(0, 5)] and str(error) == str(expected_read.value)


def test_lines_cut_in_one_go_build_the_samples_of_read_run(tmp_path: Path) -> None:
    lines = [json.dumps({"i": i, "t": "é" * i}) for i in range(40)]
    lines[9] = ' {"i": 9} '  # whitespace around: the JSON decoder's, not the scanner's
    lines[25] = '{"i": 25, broken}'
    source = load_source(str(jsonl_file(tmp_path, lines)))
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    assert builder.jsonl_crude
    indices = [3, 1, 30, 9, 2, 25, 7]
    assert reader.line_run([0] * len(indices), indices) is None  # nothing read ahead yet
    reader.prefetch(np.zeros(len(indices), np.int64), np.array(indices, np.int64))
    raws = reader.line_run([0] * len(indices), indices)
    assert raws is not None and len(raws) == len(indices)
    read, error = reader.read_run([0] * len(indices), indices)
    assert error is None and list(raws) == read and raws[2:5] == read[2:5]
    samples, failed = builder.assemble_lines(raws, indices)
    expected, expected_failure = builder.assemble_run(read, indices)
    assert [as_fields(s) for s in samples] == [as_fields(s) for s in expected]
    assert len(samples) == 5 and samples[3]["json"] == {"i": 9}
    assert isinstance(failed, SampleError) and str(failed) == str(expected_failure)
    # Not all of one file, or outside the index: left to read_run, which reports it.
    assert reader.line_run([0, 1], [3, 1]) is None
    assert reader.line_run([0, 0], [3, 40]) is None


def test_runs_of_scanned_lines_are_the_line_by_line_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [json.dumps({"i": i, "t": "é" * i, "n": [1.5, None, True]}) for i in range(40)]
    source = load_source(str(jsonl_file(tmp_path, lines)))
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    indices = [3, 1, 30, 9, 2, 25, 7]
    reader.prefetch(np.zeros(len(indices), np.int64), np.array(indices, np.int64))
    raws = reader.line_run([0] * len(indices), indices)
    assert raws is not None
    refs = [100 + i for i in indices]
    made = []
    monkeypatch.setattr(line_runs, "scanned_lines", lambda *a: made.append(scanned_lines(*a)))
    line_by_line, failed = builder.assemble_lines(raws, refs)  # scanned_lines' None: the loop
    assert failed is None and made[0] is not None and len(made[0]) == len(indices)
    for sample, expected in zip(made[0], line_by_line, strict=True):
        assert type(sample) is CrudeSample and list(sample.items()) == list(expected.items())
    assert made[0][0]["__sources__"][0] == source_info(source.path, 103, "lines.jsonl", ("3.json",))
    read, error = reader.read_run([0] * len(indices), indices)
    assert error is None
    assert builder.assemble_run(read, refs)[0] == line_by_line  # raw samples: the same path


@pytest.mark.parametrize(
    "line",
    [b' {"a": 1}', b'{"a": 1} ', b'{"a": 1}{}', b"", b"\xff", b'{"a": 1', b"]", None,
     bytearray(b"{}")],
)  # fmt: skip
def test_scanned_lines_leave_any_other_run_to_the_line_by_line_loop(line: Any) -> None:
    keys, refs, shards = ["0", "1", "2"], [0, 1, 2], ["a.jsonl"] * 3
    good = scanned_lines("/d", None, keys, [b"{}", b"[1]", b'"x"'], shards, refs)
    assert good is not None and [s["json"] for s in good] == [{}, [1], "x"]
    for at in range(3):
        lines: list[Any] = [b"{}", b"[1]", b'"x"']
        lines[at] = line
        assert scanned_lines("/d", None, keys, lines, shards, refs) is None, (at, line)
    assert scanned_lines("/d", None, keys[:2], [b"{}"] * 3, shards, refs) is None
    assert scanned_lines("/d", None, [], [], [], []) is None


def test_a_typed_run_reports_a_missing_part_as_one_by_one(tmp_path: Path) -> None:
    yaml = make_dataset_yaml("TextSample", {"text": "txt"})
    root = make_val_texts(tmp_path / "d", shards=1, per_shard=3, dataset_yaml=yaml)
    source = load_source(str(root), split_part="val")
    builder, reader = SampleBuilder(source, SampleDecoder()), source.reader()
    raws = [reader.read(0, i) for i in range(3)]
    raws[1] = raws[1]._replace(parts={"json": raws[1].parts["json"]})  # no txt part
    samples, failed = builder.assemble_run(raws, [0, 1, 2])
    with pytest.raises(SampleError) as expected:
        builder.assemble(raws[1], 1)
    assert len(samples) == 1 and str(failed) == str(expected.value)


def cook_text(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=sample["json"]["t"])


class Cooking(DefaultTaskEncoder[Any, Any, Any, Any]):
    cookers = (Cooker(cook_text),)


def test_a_jsonl_loader_skips_a_bad_line_in_a_run_and_reports_where(tmp_path: Path) -> None:
    lines = [json.dumps({"i": i, "t": f"line {i}"}) for i in range(300)]
    lines[123] = '{"t": "unterminated}'
    path = jsonl_file(tmp_path, lines)

    def dataset(policy: str) -> Any:
        return get_train_dataset(
            str(path), batch_size=10, shuffle_buffer_size=None, max_samples_per_sequence=None,
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
            task_encoder=Cooking(), error_policy=ErrorPolicy(mode=policy), repeat=False,
        )  # fmt: skip

    with get_loader(dataset("skip")) as loader:
        texts = [t for batch in loader for t in batch.text]
        stats = loader.stats()
    assert collections.Counter(texts) == collections.Counter(
        f"line {i}" for i in range(300) if i != 123
    )
    assert sum(stats.skipped.values()) == 1 and stats.stage_seconds["cook"] > 0
    offset = sum(len(line) + 1 for line in lines[:123])
    with get_loader(dataset("raise")) as loader, pytest.raises(SampleError) as failure:
        list(loader)
    assert failure.value.path is not None and failure.value.path.endswith("lines.jsonl")
    assert failure.value.offset == offset and failure.value.key == "123"


RAISED: list[Exception] = []
CALLERS: list[str] = []


def cook_or_raise(sample: dict[str, Any]) -> TextSample:
    CALLERS.append(sys._getframe(1).f_code.co_name)
    if RAISED:
        raise RAISED[0]
    return TextSample(**basic_sample_keys(sample), text=sample["json"]["t"])


class CookOrRaise(DefaultTaskEncoder[Any, Any, Any, Any]):
    cookers = (Cooker(cook_or_raise),)


@pytest.mark.parametrize(
    "error",
    [ValueError("bad"), SampleError("no key"), SampleError("keyed", key="k"), SkipSample(),
     ConfigError("setup")],
)  # fmt: skip
def test_a_run_calls_the_cooker_itself_and_fails_as_the_kitchen_does(
    tmp_path: Path, error: Exception
) -> None:
    source = load_source(str(jsonl_file(tmp_path, ['{"t": "a"}', '{"t": "b"}'])))
    kitchen = SampleBuilder(source, SampleDecoder(), CookOrRaise()).kitchen
    assert kitchen is not None and kitchen.direct is cook_or_raise
    reader = source.reader()
    crude = SampleBuilder(source, SampleDecoder()).assemble(reader.read(0, 1), 1)
    tracker = SimpleNamespace(consecutive=0, storage_shards=set())
    out: list[Any] = []
    CALLERS.clear()
    assert plain_outputs([crude], kitchen, 0, 0, 1, tracker, out, pytest.fail) == (1, 0)  # type: ignore[arg-type]
    assert CALLERS == ["_outputs"] and out[0].text == "b"  # the run loop: no Kitchen.cook between
    RAISED[:] = [error]
    try:
        failures: list[tuple[Exception, int]] = []
        plain_outputs([crude], kitchen, 0, 0, 1, tracker, [], lambda e, j: failures.append((e, j)))  # type: ignore[arg-type]
        with pytest.raises(Exception) as expected:  # noqa: PT011 (any: what cook raises)
            kitchen.cook(crude)
    finally:
        RAISED.clear()
    [(failure, at)] = failures
    assert at == 0 and type(failure) is type(expected.value)
    assert str(failure) == str(expected.value) and vars(failure) == vars(expected.value)
    assert failure.__cause__ is expected.value.__cause__
    assert failure.__context__ is expected.value.__context__ is None or (
        type(failure.__context__) is type(expected.value.__context__)
    )
    assert failure.__traceback__ is not None


def test_locate_finds_what_block_finds() -> None:
    blocks = LocalBlocks()
    blocks.add({"a": [(0, 4, b"abcd"), (10, 14, b"klmn")], "b": [(0, 2, b"xy")]})
    blocks.add({"a": [(20, 30, b"0123456789"), (40, 50, b"short")]})  # the last read short
    rng = random.Random(0)
    spans = [(start, start + rng.randrange(0, 6)) for start in range(52)]
    starts = np.array([s for s, _ in spans], np.int64)
    ends = np.array([e for _, e in spans], np.int64)
    found = blocks.locate("a", starts, ends)
    assert found == [blocks.block("a", s, e) for s, e in spans]
    assert any(f is not None for f in found) and found[-1] is None
    assert blocks.locate("c", starts[:3], ends[:3]) == [None] * 3


def test_coalescing_in_numpy_equals_the_plain_loop() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 300))
        starts = np.sort(rng.integers(0, 1 << 22, n)).astype(np.uint64)
        ends = starts + rng.integers(0, 1 << 17, n).astype(np.uint64)
        merged: list[tuple[int, int]] = []
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            if merged and start - merged[-1][1] <= 1 << 16:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        assert coalesce(starts, ends) == merged


def test_sorted_unique_is_np_unique() -> None:
    rng = np.random.default_rng(0)
    for n in [0, 1, 2, 3, *rng.integers(4, 5000, 60).tolist()]:
        values = rng.integers(0, max(1, n // int(rng.integers(1, 4))), n)
        got, want = sorted_unique(values), np.unique(values)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_prefetch_of_few_samples_per_shard_reads_the_blocks_of_the_numpy_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_val_texts(tmp_path / "d", shards=4, per_shard=9, dataset_yaml=YAMLS["crude"])
    source = load_source(str(root), split_part="val")
    rng = np.random.default_rng(0)
    shard_ids = rng.integers(0, 4, 40)
    indices = rng.integers(-2, 11, 40)  # some outside the shards' indexes: left out of the hint
    kept: dict[int, Any] = {}
    for few in (32, 0):  # plain lists, then numpy for every shard
        monkeypatch.setattr(read_module, "_FEW", few)
        reader = source.reader()
        reader.prefetch(shard_ids, indices)
        kept[few] = list(reader._blocks._hints)
        reader.close()
    assert kept[32] == kept[0] and len(kept[0]) == 1 and len(kept[0][0]) == 4


def test_offsets_of_large_indexes_taken_one_by_one_read_what_whole_lists_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A shard index larger than LIST_WHOLE is not made a list whole per run or hint (that cost
    # ~0.1 ms per run for 10^4-sample shards): its few offsets are taken from numpy instead.
    root = make_val_texts(tmp_path / "d", shards=3, per_shard=9, dataset_yaml=YAMLS["crude"])
    source = load_source(str(root), split_part="val")
    rng = np.random.default_rng(1)
    shard_ids, indices = rng.integers(0, 3, 30), rng.integers(0, 9, 30)
    seen: dict[int, Any] = {}
    for whole in (1024, 0):  # every index listed whole, then none
        monkeypatch.setattr(read_module, "LIST_WHOLE", whole)  # hints
        monkeypatch.setattr(read_tar, "LIST_WHOLE", whole)  # runs
        reader = source.reader()
        reader.prefetch(shard_ids, indices)
        hints = list(reader._blocks._hints)
        raws, error = reader.read_run(shard_ids.tolist(), indices.tolist())
        assert error is None
        seen[whole] = (hints, raws)
        reader.close()
    assert seen[1024] == seen[0] and len(seen[0][0]) == 1
    reader, pairs = source.reader(), zip(shard_ids.tolist(), indices.tolist(), strict=True)
    assert seen[0][1] == [reader.read(s, i) for s, i in pairs]


def test_a_large_local_index_is_mapped_and_reads_what_a_read_one_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Indexes of at least _MAP_BYTES are memory-mapped (a JSONL file's index can be GBs, and
    # every worker of every rank would hold a copy); smaller ones are read into memory.
    lines = [json.dumps({"i": i, "t": "x" * (i % 7)}) for i in range(300)]
    source = load_source(str(jsonl_file(tmp_path, lines)))
    indices = [5, 299, 0, 150, 151, 17]
    seen = {}
    for limit in (1 << 20, 8 * 301):  # 301 entries: read, then mapped
        monkeypatch.setattr(read_module, "_MAP_BYTES", limit)
        reader = source.reader()
        offsets = reader.offsets(0)
        mapped = isinstance(getattr(offsets.base, "obj", None), mmap.mmap)
        assert mapped == (limit == 8 * 301) and offsets.flags.writeable != mapped
        reader.prefetch(np.zeros(len(indices), np.int64), np.array(indices, np.int64))
        raws, error = reader.read_run([0] * len(indices), indices)
        assert error is None
        seen[limit] = (offsets.tolist(), raws, [reader.read(0, i) for i in indices])
        reader.close()
    assert seen[1 << 20] == seen[8 * 301]
    assert [json.loads(raw.parts["json"])["i"] for raw in seen[8 * 301][1]] == indices


def test_a_reader_keeps_a_bounded_number_of_bytes_of_shard_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker visiting thousands of large shards would otherwise keep every index it read.
    root = make_val_texts(tmp_path / "d", shards=6, per_shard=9, dataset_yaml=YAMLS["crude"])
    source = load_source(str(root), split_part="val")
    monkeypatch.setattr(read_module, "_OFFSETS_BYTES", 3 * 80)  # three 10-entry indexes
    reader, expected = source.reader(), source.reader()
    pairs = [(s, i) for i in (0, 8) for s in range(6)]
    for s, i in pairs:
        assert reader.read(s, i) == expected.read(s, i)
        assert reader._offsets.held <= 3 * 80 and len(reader._offsets) <= 3
    assert list(reader._offsets) == [source.shards[s] for s in (3, 4, 5)]
    monkeypatch.setattr(read_module, "_MAP_BYTES", 8)  # now every index is mapped: no weight
    for s, i in pairs:
        assert reader.read(s, i) == expected.read(s, i)
    assert len(reader._offsets) == 6 and reader._offsets.held == 3 * 80  # 3, 4, 5 as read
    reader.close()
    expected.close()


def test_charge_counts_as_start_and_stop_would(monkeypatch: pytest.MonkeyPatch) -> None:
    now = ManualClock()  # moved by the test: exact figures, whatever the machine's load
    monkeypatch.setattr(stage_clock, "perf_counter", now)
    clock = StageClock()
    clock.start(READ)
    now.advance(0.01)
    started = now()
    now.advance(0.05)  # cooking, measured by the caller while read is the open stage
    clock.charge(COOK, now() - started)
    now.advance(0.01)
    clock.stop()
    seconds = clock.delta().seconds
    assert seconds["cook"] == pytest.approx(0.05)
    assert seconds["read"] == pytest.approx(0.02)  # exclusive, as nested
    clock.charge(DECODE, 0.25)
    assert clock.delta().seconds == {"decode": 0.25}
    clock.enabled = False
    clock.charge(DECODE, 1.0)
    assert clock.delta().seconds == {}


def test_basic_sample_keys_takes_present_keys_only() -> None:
    full = {"__key__": "k", "__restore_key__": (), "__subflavors__": {}, "__sources__": ()}
    assert basic_sample_keys({**full, "txt": "hi"}) == full
    assert basic_sample_keys({"__key__": "k", "txt": "hi"}) == {"__key__": "k"}
    missing: collections.defaultdict[str, Any] = collections.defaultdict(str, __key__="k")
    assert basic_sample_keys(missing) == {"__key__": "k"}  # in, not [], decides


def test_plain_decoders_only_where_decode_would_call_them() -> None:
    class Custom(SampleDecoder):
        def decode(self, key: str, parts: dict[str, bytes]) -> dict[str, Any]:
            return {"custom": True}

    assert SampleDecoder().plain_decoder("txt") is not None
    assert SampleDecoder().plain_decoder("jpg") is None
    assert SampleDecoder(guess_content=True).plain_decoder("json") is None
    assert Custom().plain_decoder("json") is None


class _Reversed(tuple[Any, ...]):
    """A restore key that iterates backwards: extended by unpacking, as encoded_key does."""

    __slots__ = ()

    def __iter__(self) -> Any:
        return reversed(tuple(self[:]))


@dataclasses.dataclass(frozen=True)
class _Frozen:
    __restore_key__: tuple[Any, ...]


class _Missing:
    __slots__ = ()


class _Raising:
    @property
    def __restore_key__(self) -> Any:
        raise AttributeError("none here")


def test_plain_outputs_extend_restore_keys_as_encoded_key() -> None:
    def samples() -> list[Any]:
        key = ("Webdataset", "/d", 7)
        return [
            TextSample(__key__="a", __restore_key__=key, text="t"),
            TextSample(__key__="b", __restore_key__=_Reversed(key), text="t"),
            TextSample(__key__="c", __restore_key__=("Webdataset", "/d"), text="t"),
            TextSample(__key__="d", __restore_key__=[*key], text="t"),  # type: ignore[arg-type]
            _Frozen(key), _Missing(), _Raising(), {"__restore_key__": key}, {"x": 1},
            {"__restore_key__": _Reversed(key)},
        ]  # fmt: skip

    tracker = SimpleNamespace(consecutive=0, storage_shards=set())
    out: list[Any] = []
    assert plain_outputs(samples(), None, 0, 5, 2, tracker, out, pytest.fail) == (10, 9)  # type: ignore[arg-type]
    want = [encoded_key(s, restore_key_of(s), 5 + 2 * j, 0) for j, s in enumerate(samples())]
    got = [getattr(s, "__restore_key__", None) if not isinstance(s, dict) else s for s in out]
    expected = [getattr(s, "__restore_key__", None) if not isinstance(s, dict) else s for s in want]
    assert got == expected
    assert got[0] == ("Webdataset", "/d", 7, 5, 0) and type(got[0]) is tuple
    assert got[1] == (7, "/d", "Webdataset", 7, 0)  # unpacked through its __iter__
    assert got[9]["__restore_key__"] == (7, "/d", "Webdataset", 23, 0)
