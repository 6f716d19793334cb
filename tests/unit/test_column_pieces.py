"""Batches made from the columns their samples were read as (stoker.runtime.column_pieces)
equal the batches the one-by-one path makes: every field (tokens, Parquet columns, keys,
restore keys, sources, subflavors), the saved state after each batch, a restore mid-epoch, a
blend of two token datasets of different dtypes, ``encode_batch`` skipping a batch, and a
damaged ``.bin`` under a skipping error policy (its batches mix columns with samples); runs of
other fields in one batch are batched from their samples; batches of arrays a loop keeps outlive
the payload ring they crossed in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import (
    DefaultTaskEncoder,
    ErrorPolicy,
    SkipSample,
    TaskEncoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
)
from stoker.model.samples import CrudeSample
from stoker.pipeline.column_raws import ColumnRaws, member_names
from stoker.runtime import stream as stream_module
from stoker.runtime.column_pieces import ColumnPieces, default_batch
from stoker.runtime.column_runs import RunColumns
from tests.unit.test_column_runs import parquet_folder, token_file
from tests.unit.test_stream_runs import collect

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


def fields(batch: Any) -> dict[str, Any]:
    """A batch's contents, arrays as (dtype, values), for comparisons."""
    assert type(batch) is CrudeSample
    out = dict(batch)
    if "tokens" in batch:
        out["tokens"] = [(t.dtype.name, t.tolist()) for t in batch["tokens"]]
    return out


class SkipsSecond(DefaultTaskEncoder[Any, Any, Any, Any]):
    """The default batching; ``encode_batch`` skips the second batch (in-process loaders)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def encode_batch(self, batch: Any) -> Any:
        self.calls += 1
        if self.calls == 2:
            raise SkipSample()
        return batch


def run(
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    *,
    columns: bool,
    state: Any = None,
    stop: int | None = None,
    workers: int = 0,
    encoder: Any = None,
    policy: str = "raise",
) -> tuple[list[tuple[dict[str, Any], Any]], int]:
    """Each batch's fields and the state after it (``columns``: the stream makes its samples in
    runs, so batches come from columns; else one by one), and how many batches were made
    from columns (in this process)."""
    monkeypatch.setattr(stream_module, "RUNS", columns)
    made = [0]
    plain = ColumnPieces.columnar_batch

    def counted(self: ColumnPieces) -> Any:
        batch = plain(self)
        made[0] += batch is not None
        return batch

    monkeypatch.setattr(ColumnPieces, "columnar_batch", counted)
    dataset = get_train_dataset(
        path, batch_size=10, shuffle_buffer_size=20, max_samples_per_sequence=30,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        error_policy=ErrorPolicy(mode=policy), repeat=False,
        **({"task_encoder": encoder} if encoder is not None else {}),
    )  # fmt: skip
    return collect(dataset, fields, state, stop), made[0]


def lengths(count: int) -> list[int]:
    return np.random.default_rng(count).integers(0, 50, count).tolist()


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_and_states_equal_the_one_by_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    path, _ = token_file(tmp_path, lengths(333), np.uint16)  # batches of 10 cut runs of 64
    got, made = run(monkeypatch, str(path), columns=True, workers=workers)
    assert got == run(monkeypatch, str(path), columns=False, workers=workers)[0]
    assert sum(len(batch["tokens"]) for batch, _ in got) == 333
    if workers == 0:  # one stream: its short last batch
        assert len(got) == 34 and len(got[-1][0]["tokens"]) == 3 and made == 34
    first = got[0][0]
    assert first["__restore_key__"][:2] == ("BatchDataset", 0)
    assert len(first["__restore_key__"]) == 12 and len(first["__sources__"]) == 10


@pytest.mark.parametrize("workers", [0, 2])
def test_parquet_batches_and_states_equal_the_one_by_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    folder = str(parquet_folder(tmp_path))
    got, made = run(monkeypatch, folder, columns=True, workers=workers)
    assert got == run(monkeypatch, folder, columns=False, workers=workers)[0]
    assert sorted(n for batch, _ in got for n in batch["n"]) == sorted([*range(25), *range(30)])
    first = got[0][0]
    assert list(first)[:4] == ["text", "n", "ids", "meta"]
    assert isinstance(first["meta"], dict) and len(first["meta"]["a"]) == 10  # a struct column
    if workers == 0:
        assert made == len(got) == 6
    state = got[2][1]
    rest, made = run(monkeypatch, folder, columns=True, workers=workers, state=state)
    assert rest == got[3:]


def test_restored_mid_epoch_runs_on_as_uninterrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = token_file(tmp_path, lengths(250), np.int32)
    whole, _ = run(monkeypatch, str(path), columns=True)
    for stop in (1, 7, 13):
        state = run(monkeypatch, str(path), columns=True, stop=stop)[0][-1][1]
        rest, made = run(monkeypatch, str(path), columns=True, state=state)
        assert rest == whole[stop:] and made == len(rest)


def test_a_blend_of_two_dtypes_equals_the_one_by_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, _ = token_file(tmp_path / "a", lengths(200), np.uint16)
    second, _ = token_file(tmp_path / "b", lengths(150), np.int64)
    yaml = tmp_path / "blend.yaml"
    yaml.write_text(
        HEADER + "  train:\n    blend_epochized:\n"
        f"      - repetitions: 1\n        path: {first}\n"
        f"      - repetitions: 1\n        path: {second}\n"
    )
    got, made = run(monkeypatch, str(yaml), columns=True)
    assert got == run(monkeypatch, str(yaml), columns=False)[0]
    assert made == len(got) == 35
    dtypes = {dtype for batch, _ in got for dtype, _ in batch["tokens"]}
    assert dtypes == {"uint16", "int64"}


def test_runs_of_other_fields_in_one_batch_are_batched_from_their_samples() -> None:
    def run_of(fields: dict[str, list[Any]], shard: str) -> RunColumns:
        keys = [f"{shard}/{i}" for i in range(2)]
        names = member_names(keys, list(fields))
        raws = ColumnRaws(fields, keys, [0, 1], [0, 0], [shard] * 2, names)
        return RunColumns(f"/d/{shard}", {}, raws, [0, 1])

    pieces = ColumnPieces()
    pieces.add(run_of({"tokens": [np.arange(2), np.arange(3)]}, "c.bin"), 0, 2, 0, 1)
    pieces.add(run_of({"text": ["a", "b"]}, "r.parquet"), 0, 2, 2, 1)
    assert pieces.columnar_batch() is None  # a blend's default batch: as from samples
    samples = list(pieces)
    assert [sorted(k for k in s if not k.startswith("__")) for s in samples] == [
        ["tokens"],
        ["tokens"],
        ["text"],
        ["text"],
    ]
    assert [s["__restore_key__"][3] for s in samples] == [0, 1, 2, 3]


def test_encode_batch_skipping_a_batch_equals_the_one_by_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = token_file(tmp_path, lengths(95), np.uint16)
    got, _ = run(monkeypatch, str(path), columns=True, encoder=SkipsSecond(), policy="skip")
    want, _ = run(monkeypatch, str(path), columns=False, encoder=SkipsSecond(), policy="skip")
    assert got == want and len(got) == 9


def test_a_damaged_bin_mixes_columns_and_samples_as_the_one_by_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = token_file(tmp_path, [*lengths(120), 9], np.uint16)
    path.write_bytes(path.read_bytes()[:-4])  # the last sequence loses two tokens
    got, made = run(monkeypatch, str(path), columns=True, policy="skip")
    assert got == run(monkeypatch, str(path), columns=False, policy="skip")[0]
    assert sum(len(batch["tokens"]) for batch, _ in got) == 120  # the damaged one skipped
    assert 0 < made < len(got)  # the batch with the damaged sequence was made of samples


def test_only_the_default_batch_is_made_from_columns() -> None:
    class OwnBatch(TaskEncoder[Any, Any, Any, Any]):
        def batch(self, samples: list[Any]) -> Any:
            return samples

    assert default_batch(TaskEncoder()) and default_batch(DefaultTaskEncoder())
    assert default_batch(DefaultTaskEncoder(raw_batch_type=CrudeSample))
    assert not default_batch(DefaultTaskEncoder(raw_batch_type=dict))
    assert not default_batch(OwnBatch())


def test_batches_of_arrays_kept_by_the_loop_survive_the_payload_ring(tmp_path: Path) -> None:
    """Batches of numpy arrays cross from the workers in the shared-memory ring, which is
    written over; a loop that keeps every batch still holds each as it was handed out."""
    rng = np.random.default_rng(5)
    path, _ = token_file(tmp_path, rng.integers(400, 600, 2000).tolist(), np.uint16)

    def batches(keep: bool) -> list[Any]:
        dataset = get_train_dataset(
            str(path), batch_size=100, shuffle_buffer_size=20, max_samples_per_sequence=30,
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        )  # fmt: skip
        out: list[Any] = []
        with get_loader(dataset) as loader:
            for batch in loader:  # ~100 kB each: the ring (4 MiB and up) wraps in ~40
                out.append(batch if keep else [t.tolist() for t in batch["tokens"]])
                if len(out) == 120:
                    return out
        return out

    kept, copied = batches(keep=True), batches(keep=False)
    assert len(kept) == len(copied) == 120
    assert [[t.tolist() for t in batch["tokens"]] for batch in kept] == copied
