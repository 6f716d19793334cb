"""A stream that reads, assembles, cooks and batches samples in runs (``stream.RUNS``,
:mod:`stoker.runtime.plain_runs`), local or remote, gives what the one-by-one path gives: the
same batches (keys, restore keys, sources, texts), the same saved state after every batch, the
same hook indices in cookers, the same skips, and the same error (file, offset, key) for a bad
line."""

from __future__ import annotations

import dataclasses
import gc
import json
from pathlib import Path
from typing import Any

import fsspec  # type: ignore[import-untyped]
import numpy as np
import pytest

from stoker import (
    Cooker,
    DefaultTaskEncoder,
    ErrorPolicy,
    SkipSample,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_savable_loader,
    get_train_dataset,
)
from stoker.errors import SampleError
from stoker.format.jsonl import prepare_jsonl
from stoker.model import cooking
from stoker.model.samples import CrudeSample
from stoker.pipeline.decode import JSON_PART, NOT_SCANNED, SampleDecoder, scan_json
from stoker.pipeline.local_blocks import LocalBlocks
from stoker.pipeline.read import ShardReader
from stoker.runtime import stream as stream_module
from stoker.runtime.plain_runs import same_runs
from stoker.runtime.worker_procs import WORKER_GC_THRESHOLD
from stoker.sources.load import load_source
from tests.conftest import make_val_texts


def jsonl_file(path: Path, count: int, bad: tuple[int, ...] = ()) -> Path:
    lines = [
        json.dumps({"i": i, "t": f"{path.stem} line {i} " + "é" * (i % 3)}) for i in range(count)
    ]
    for i in bad:
        lines[i] = '{"i": ' + str(i) + ', "t": "unterminated}'
    path.write_text("".join(line + "\n" for line in lines))
    prepare_jsonl(str(path))
    return path


class Recording(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Cooks JSONL lines to TextSamples, records the hook indices each cook saw, and skips
    the lines whose ``i`` is in ``skip``."""

    def __init__(self, skip: frozenset[int] = frozenset()) -> None:
        super().__init__()
        self.skip = skip
        self.seen: list[tuple[str, int, int]] = []
        self.cookers = (Cooker(self.cook),)

    def cook(self, sample: dict[str, Any]) -> TextSample:
        self.seen.append((sample["__key__"], self.current_batch_index, self.current_sample_index))
        if sample["json"]["i"] in self.skip:
            raise SkipSample()
        return TextSample(**basic_sample_keys(sample), text=sample["json"]["t"])


def fields(batch: Any) -> dict[str, Any]:
    """A batch's contents (its restore key included), for comparisons."""
    out = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    out["__restore_key__"] = batch.__restore_key__
    return out


def run(
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    *,
    runs: bool,
    encoder: Any = None,
    policy: str = "raise",
    batch_size: int = 10,
    state: Any = None,
    stop: int | None = None,
    workers: int = 0,
    repeat: bool = False,
    **options: Any,
) -> list[tuple[dict[str, Any], Any]]:
    """Each batch's fields and the loader's state after it (``stop``: only that many)."""
    monkeypatch.setattr(stream_module, "RUNS", runs)
    dataset = get_train_dataset(
        str(path), batch_size=batch_size, shuffle_buffer_size=20, max_samples_per_sequence=30,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        error_policy=ErrorPolicy(mode=policy), repeat=repeat,
        **({"task_encoder": encoder} if encoder is not None else {}), **options,
    )  # fmt: skip
    return collect(dataset, fields, state, stop)


def collect(
    dataset: Any, fields: Any, state: Any = None, stop: int | None = None
) -> list[tuple[dict[str, Any], Any]]:
    """``fields`` of each batch of a savable loader over ``dataset`` and its state after it
    (restored from ``state`` first; ``stop``: only that many batches)."""
    out = []
    with get_savable_loader(dataset) as loader:
        if state is not None:
            loader.restore_state_rank(state)
        for batch in loader:
            out.append((fields(batch), loader.save_state_rank()))
            if stop is not None and len(out) == stop:
                break
    return out


def test_jsonl_batches_states_and_hook_indices_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 333)  # batches of 10 cut the runs of 64 anywhere
    fast, slow = Recording(), Recording()
    got = run(monkeypatch, path, runs=True, encoder=fast)
    assert got == run(monkeypatch, path, runs=False, encoder=slow)
    assert len(got) == 34 and len(got[-1][0]["text"]) == 3  # the short last batch too
    assert fast.seen == slow.seen and len(fast.seen) == 333
    assert {batch for _, batch, _ in fast.seen} == set(range(34))


def test_restored_mid_epoch_runs_on_as_uninterrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 250)
    whole = run(monkeypatch, path, runs=True, encoder=Recording())
    for stop in (1, 7, 13):
        state = run(monkeypatch, path, runs=True, encoder=Recording(), stop=stop)[-1][1]
        assert state == whole[stop - 1][1]
        resumed = run(monkeypatch, path, runs=True, encoder=Recording(), state=state)
        assert resumed == whole[stop:]
        one_by_one = run(monkeypatch, path, runs=False, encoder=Recording(), state=state)
        assert one_by_one == resumed


def test_skips_in_a_run_equal_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 200, bad=(5, 70, 71, 150))
    skip = frozenset({0, 9, 64, 65, 66, 199})  # cookers skip these on purpose
    fast, slow = Recording(skip), Recording(skip)
    got = run(monkeypatch, path, runs=True, encoder=fast, policy="skip")
    assert got == run(monkeypatch, path, runs=False, encoder=slow, policy="skip")
    assert fast.seen == slow.seen
    texts = [t for batch, _ in got for t in batch["text"]]
    assert len(texts) == 200 - 4 - len(skip)
    assert not any(f"line {i} " in t for t in texts for i in (5, 70, 150, *skip))


def test_a_bad_line_raises_with_file_offset_and_key_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 120, bad=(77,))
    errors = []
    for runs in (True, False):
        with pytest.raises(SampleError) as failure:
            run(monkeypatch, path, runs=runs, encoder=Recording())
        errors.append(failure.value)
    offset = sum(len(line) for line in path.read_bytes().splitlines(keepends=True)[:77])
    for error in errors:
        assert error.path is not None and error.path.endswith("a.jsonl")
        assert error.offset == offset and error.key == "77"
    assert str(errors[0]) == str(errors[1])


def test_typed_tar_samples_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_val_texts(tmp_path / "d", shards=12, per_shard=9)
    fast = run(monkeypatch, root, runs=True, split_part="val", batch_size=7)
    assert fast == run(monkeypatch, root, runs=False, split_part="val", batch_size=7)
    assert sum(len(batch["text"]) for batch, _ in fast) == 108


def test_a_blend_equals_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jsonl_file(tmp_path / "a.jsonl", 150)
    jsonl_file(tmp_path / "b.jsonl", 90)
    yaml = tmp_path / "blend.yaml"
    yaml.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    blend:\n      - weight: 1\n        path: a.jsonl\n"
        "      - weight: 2\n        path: b.jsonl\n"
    )
    fast, slow = Recording(), Recording()
    got = run(monkeypatch, yaml, runs=True, encoder=fast, stop=40, repeat=True)
    assert got == run(monkeypatch, yaml, runs=False, encoder=slow, stop=40, repeat=True)
    assert fast.seen == slow.seen
    texts = [t for batch, _ in got for t in batch["text"]]
    assert any(t.startswith("a line") for t in texts) and any(t.startswith("b line") for t in texts)


def test_workers_give_the_batches_of_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 200)
    slow = run(monkeypatch, path, runs=False, encoder=Recording(), workers=2)
    fast = run(monkeypatch, path, runs=True, encoder=Recording(), workers=2)
    assert [batch for batch, _ in fast] == [batch for batch, _ in slow]
    assert [state for _, state in fast] == [state for _, state in slow]


def test_same_runs_are_the_runs_of_equal_values() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        values = rng.integers(0, 3, int(rng.integers(0, 40)))
        expected: list[tuple[int, int]] = []
        for v in values.tolist():
            if expected and expected[-1][0] == v:
                expected[-1] = (v, expected[-1][1] + 1)
            else:
                expected.append((v, 1))
        assert same_runs(values) == expected


def test_scan_json_decodes_as_the_json_part_decoder_or_defers() -> None:
    decoder = SampleDecoder()
    cases = [
        b'{"a": [1, 2.5e3, "\\u00e9", null, true]}', '{"t": "é ü"}'.encode(), b"17", b'"s"',
        b' {"a": 1}', b'{"a": 1}\n', '{"a": 1}'.encode("utf-16"), b"\xef\xbb\xbf{}",
        b'{"a": 1} {"b": 2}', b'{"a": ', b"", b"\xff\xfe{", b"NaN",
    ]  # fmt: skip
    for data in cases:
        value = scan_json(data)
        try:
            expected = JSON_PART("json", data, decoder)
        except Exception:
            assert value is NOT_SCANNED, data
            continue
        if value is not NOT_SCANNED:
            assert value == expected or (value != value and expected != expected), data
    assert scan_json(b'{"a": 1}') == {"a": 1} and scan_json(b' {"a": 1}') is NOT_SCANNED


def test_locate_maps_spans_all_held_as_block_finds_them() -> None:
    blocks = LocalBlocks()
    blocks.add({"a": [(0, 100, bytes(100)), (200, 300, bytes(100))]})
    starts = np.array([5, 210, 0, 250, 99], np.int64)
    ends = starts + 1
    found = blocks.locate("a", starts, ends)
    assert found == [blocks.block("a", s, e) for s, e in zip(starts, ends, strict=True)]
    assert None not in found and found[1] is not found[0]


def test_basic_sample_keys_takes_the_four_keys_of_sample() -> None:
    assert cooking._FOUR  # else every cook takes the slower loop
    crude = CrudeSample(
        txt="x", __key__="k", __restore_key__=(1,), __subflavors__={}, __sources__=()
    )
    assert list(basic_sample_keys(crude)) == list(cooking._FIELDS)
    assert basic_sample_keys(crude)["__restore_key__"] == (1,)


def test_in_process_batches_leave_the_collector_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = jsonl_file(tmp_path / "a.jsonl", 50)
    before = gc.get_threshold()
    seen: list[int] = []

    class Watching(Recording):
        def cook(self, sample: dict[str, Any]) -> TextSample:
            seen.append(gc.get_threshold()[0])
            return super().cook(sample)

    assert len(run(monkeypatch, path, runs=True, encoder=Watching())) == 5
    assert gc.get_threshold() == before
    assert set(seen) == {max(before[0], WORKER_GC_THRESHOLD)}


def test_lines_read_ahead_are_the_lines_read_one_by_one(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    body = '{"i": 0}\n  {"i": 1} \r\n{"i": 2}\n\n\n{"i": 3}\t\n{"i": 4}\r\n{"i": 5}'  # no final \n
    path.write_text(body)
    prepare_jsonl(str(path))
    reader = load_source(str(path)).reader()
    indices = [5, 0, 3, 1, 4, 2, 5]
    reader.prefetch(np.zeros(len(indices), np.int64), np.array(indices, np.int64))
    offsets = reader.offsets(0).astype(np.int64)
    picked = np.array(indices)
    held = reader._blocks.locate(reader.shards[0], offsets[picked], offsets[picked + 1])
    assert None not in held  # so read_run cuts them from the read-ahead block at once
    raws, error = reader.read_run([0] * len(indices), indices)
    assert error is None and raws == [reader.read(0, i) for i in indices]
    assert [raw.parts["json"] for raw in raws[:3]] == [b'{"i": 5}', b'{"i": 0}', b'{"i": 3}']


def upload(folder: Path, url: str) -> str:
    fs = fsspec.filesystem("memory")
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            fs.pipe_file(f"{url}/{path.relative_to(folder).as_posix()}", path.read_bytes())
    return url


def counting_remote_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of each remote run read from now on (ShardReader._remote_run)."""
    lengths: list[int] = []
    real = ShardReader._remote_run

    def counted(self: ShardReader, shard_ids: Any, indices: Any, out: list[Any]) -> None:
        before = len(out)
        real(self, shard_ids, indices, out)
        lengths.append(len(out) - before)

    monkeypatch.setattr(ShardReader, "_remote_run", counted)
    return lengths


def test_remote_tar_samples_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_root: str
) -> None:
    url = upload(make_val_texts(tmp_path / "d", shards=12, per_shard=9), memory_root)
    lengths = counting_remote_runs(monkeypatch)
    fast = run(monkeypatch, url, runs=True, split_part="val", batch_size=7)  # type: ignore[arg-type]
    assert sum(lengths) == 108 and max(lengths) > 1  # read in runs from the read-ahead
    lengths.clear()
    assert fast == run(monkeypatch, url, runs=False, split_part="val", batch_size=7)  # type: ignore[arg-type]
    assert lengths == []
    assert sum(len(batch["text"]) for batch, _ in fast) == 108


def test_remote_lines_with_skips_and_bad_lines_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_root: str
) -> None:
    (tmp_path / "d").mkdir()
    jsonl_file(tmp_path / "d" / "a.jsonl", 200, bad=(5, 70, 71, 150))
    url = upload(tmp_path / "d", memory_root) + "/a.jsonl"
    skip = frozenset({0, 9, 64, 65, 66, 199})
    fast, slow = Recording(skip), Recording(skip)
    lengths = counting_remote_runs(monkeypatch)
    got = run(monkeypatch, url, runs=True, encoder=fast, policy="skip")  # type: ignore[arg-type]
    assert max(lengths) > 1
    assert got == run(monkeypatch, url, runs=False, encoder=slow, policy="skip")  # type: ignore[arg-type]
    assert fast.seen == slow.seen
    assert len([t for batch, _ in got for t in batch["text"]]) == 200 - 4 - len(skip)
    errors = []
    for runs in (True, False):
        with pytest.raises(SampleError) as failure:
            run(monkeypatch, url, runs=runs, encoder=Recording())  # type: ignore[arg-type]
        errors.append(str(failure.value))
    assert errors[0] == errors[1] and "a.jsonl" in errors[0]


def test_remote_runs_restored_and_with_workers_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_root: str
) -> None:
    (tmp_path / "d").mkdir()
    jsonl_file(tmp_path / "d" / "a.jsonl", 250)
    url = upload(tmp_path / "d", memory_root) + "/a.jsonl"
    whole = run(monkeypatch, url, runs=True, encoder=Recording())  # type: ignore[arg-type]
    assert whole == run(monkeypatch, url, runs=False, encoder=Recording())  # type: ignore[arg-type]
    state = whole[12][1]
    resumed = run(monkeypatch, url, runs=True, encoder=Recording(), state=state)  # type: ignore[arg-type]
    assert resumed == whole[13:]
    slow = run(monkeypatch, url, runs=False, encoder=Recording(), workers=2)  # type: ignore[arg-type]
    fast = run(monkeypatch, url, runs=True, encoder=Recording(), workers=2)  # type: ignore[arg-type]
    assert fast == slow
