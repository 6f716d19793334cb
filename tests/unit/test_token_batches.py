"""Batches of token sequences made from their columns (stoker.runtime.token_batches) equal the
batches the one-by-one path makes: every field (tokens, keys, restore keys, sources,
subflavors), the saved state after each batch, a restore mid-epoch, a blend of two token
datasets of different dtypes, ``encode_batch`` skipping a batch, and a damaged ``.bin`` under a
skipping error policy (its batches mix columns with samples)."""

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
    get_train_dataset,
)
from stoker.model.samples import CrudeSample
from stoker.runtime import stream as stream_module
from stoker.runtime.token_batches import TokenPieces, default_batch
from tests.unit.test_stream_runs import collect
from tests.unit.test_token_runs import token_file

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


def fields(batch: Any) -> dict[str, Any]:
    """A batch's contents, arrays as (dtype, values), for comparisons."""
    assert type(batch) is CrudeSample
    out = dict(batch)
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
    runs, so token batches come from columns; else one by one), and how many batches were made
    from columns (in this process)."""
    monkeypatch.setattr(stream_module, "RUNS", columns)
    made = [0]
    plain = TokenPieces.columnar_batch

    def counted(self: TokenPieces) -> Any:
        batch = plain(self)
        made[0] += batch is not None
        return batch

    monkeypatch.setattr(TokenPieces, "columnar_batch", counted)
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
