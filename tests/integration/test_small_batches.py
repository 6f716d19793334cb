"""Small batches at num_workers=2: bundled and columnar on the way, the same batches as in-process,
the same state after each batch."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    Cooker,
    DefaultTaskEncoder,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_savable_loader,
    get_train_dataset,
    stateless,
)
from stoker.format.jsonl import prepare_jsonl
from stoker.runtime.worker_procs import WORKER_GC_THRESHOLD
from tests.contract.contract import run_contract

LINES = 240


def cook_text(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=sample["json"]["text"])


class Encoder(DefaultTaskEncoder[Any, Any, Any, Any]):
    cookers = [Cooker(stateless(cook_text))]  # noqa: RUF012


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("small") / "lines.jsonl"
    path.write_text("".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(LINES)))
    prepare_jsonl(str(path))
    return path


def loader(path: Path, workers: int) -> Any:
    dataset = get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        batch_size=8, shuffle_buffer_size=20, max_samples_per_sequence=10,
        virtual_workers=2, task_encoder=Encoder(),
    )  # fmt: skip
    return get_savable_loader(dataset)


def batches(path: Path, workers: int, n: int) -> list[Any]:
    with loader(path, workers) as it:
        got = []
        for batch in it:
            got.append(batch)
            if len(got) == n:
                return got
    raise AssertionError("the loader ended early")


def test_workers_hand_out_the_same_batches_with_their_sources(lines: Path) -> None:
    in_process, workers = batches(lines, 0, 45), batches(lines, 2, 45)  # more than one pass
    assert [b.text for b in workers] == [b.text for b in in_process]
    assert [b.__key__ for b in workers] == [b.__key__ for b in in_process]
    assert [b.__restore_key__ for b in workers] == [b.__restore_key__ for b in in_process]
    assert [b.__sources__ for b in workers] == [b.__sources__ for b in in_process]
    first = workers[0].__sources__
    assert type(first) is list and len(first) == 8 and first[0][0].shard_name == "lines.jsonl"


def test_state_after_each_bundled_batch_restores_exactly(lines: Path) -> None:
    run_contract(lambda: loader(lines, 2), total=24, midpoints=[1, 7, 13])


def cook_collector_probe(sample: dict[str, Any]) -> TextSample:
    """The text is what the collector of the process that cooks the sample is set to."""
    text = f"{gc.get_threshold()[0]} {gc.get_freeze_count() > 0}"
    return TextSample(**basic_sample_keys(sample), text=text)


class ProbeEncoder(DefaultTaskEncoder[Any, Any, Any, Any]):
    cookers = [Cooker(stateless(cook_collector_probe))]  # noqa: RUF012


def test_batches_are_made_with_spaced_collections_and_the_user_settings_stay_between_them(
    lines: Path,
) -> None:
    before = gc.get_threshold()
    for workers in (2, 0):
        dataset = get_train_dataset(
            str(lines),
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
            batch_size=8, shuffle_buffer_size=20, max_samples_per_sequence=10,
            task_encoder=ProbeEncoder(),
        )  # fmt: skip
        texts = set()
        with get_savable_loader(dataset) as it:
            for _, batch in zip(range(6), it, strict=False):
                texts.update(batch.text)
                assert gc.get_threshold() == before  # the user's, between batches
        if workers:
            assert texts == {f"{WORKER_GC_THRESHOLD} True"}
        else:  # num_workers=0: spaced while the batch is made, nothing frozen
            assert texts == {f"{WORKER_GC_THRESHOLD} {gc.get_freeze_count() > 0}"}
    assert gc.get_threshold() == before
