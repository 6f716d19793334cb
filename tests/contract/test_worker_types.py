"""The save/restore contract under every worker type: fork and spawn processes, threads, inline.

Every worker type runs the same per-worker path, so the batches, their order and the states
must be the same under all: each contract run here is also compared with the fork run, and
states saved under one type are restored under another.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch.utils.data

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless
from stoker.errors import ConfigError
from stoker.runtime.loader import Loader
from tests.contract.contract import (
    fingerprint,
    rank_free,
    roundtrip,
    run_contract,
    take,
    write_text_dataset,
)
from tests.contract.test_save_restore_packing import RandomPacking
from tests.integration._blends import jsonl_blend
from tests.integration.test_packing import make_loader as packing_loader
from tests.integration.test_packing import write_texts

TYPES = ["fork", "thread", "main"]
MIDPOINTS = [0, 1, 4, 7, 13, 23]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """6 shards x 7 text samples (42), prepared as TextSample."""
    return write_text_dataset(tmp_path_factory.mktemp("worker_types") / "ds")


class WhereItRan(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Each sample's key, the worker torch says it runs in, and the thread that encoded it."""

    @stateless
    def encode_sample(self, sample: Any) -> Any:
        info = torch.utils.data.get_worker_info()
        worker = None if info is None else (info.id, info.num_workers)
        return {"key": sample.__key__, "worker": worker, "thread": threading.current_thread().name}

    def batch(self, samples: list[Any]) -> Any:
        return samples


def loader_of(
    path: str, worker_type: str, workers: int = 2, *, world: int = 1, rank: int = 0, **kw: Any
) -> Loader:
    config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
    options = {"batch_size": 4, "shuffle_buffer_size": 5, "max_samples_per_sequence": 3,
               "virtual_workers": 4, **kw}  # fmt: skip
    return get_loader(
        get_train_dataset(path, worker_config=config, **options), worker_type=worker_type
    )


def as_type(make: Callable[[], Loader], worker_type: str) -> Callable[[], Loader]:
    """``make`` (an existing contract test's loader) with its dataset under ``worker_type``."""
    return lambda: get_loader(make().dataset, worker_type=worker_type)


@pytest.mark.parametrize("worker_type", TYPES)
def test_contract_over_worker_types(dataset: str, worker_type: str) -> None:
    run_contract(lambda: loader_of(dataset, worker_type), total=30, midpoints=MIDPOINTS)


@pytest.mark.parametrize("worker_type", ["thread", "main"])
def test_every_sample_once_and_the_batches_of_fork(dataset: str, worker_type: str) -> None:
    with loader_of(dataset, "fork", repeat=False) as loader:
        reference = [fingerprint(b) for b in loader]
    with loader_of(dataset, worker_type, repeat=False) as loader:
        batches = list(loader)
    assert [fingerprint(b) for b in batches] == reference
    keys = Counter(key for batch in batches for key in batch.__key__)
    assert len(keys) == 42 and set(keys.values()) == {1}


def test_thread_workers_run_on_their_threads_and_see_their_worker_info(dataset: str) -> None:
    task_encoder = WhereItRan()
    with loader_of(dataset, "thread", repeat=False, task_encoder=task_encoder) as loader:
        samples = [s for batch in loader for s in batch]
    assert len(samples) == 42
    assert {s["worker"] for s in samples} == {(0, 2), (1, 2)}
    assert {s["thread"] for s in samples} == {"stoker-worker-0", "stoker-worker-1"}
    assert torch.utils.data.get_worker_info() is None  # not on the training thread
    with loader_of(dataset, "main", repeat=False, task_encoder=task_encoder) as loader:
        inline = [s for batch in loader for s in batch]
    assert {s["thread"] for s in inline} == {threading.current_thread().name}


@pytest.mark.parametrize(("saved_under", "restored_under"),
                         [("fork", "thread"), ("thread", "fork"), ("fork", "main"),
                          ("main", "thread")])  # fmt: skip
def test_state_saved_under_one_type_restores_under_another(
    dataset: str, saved_under: str, restored_under: str
) -> None:
    with loader_of(dataset, saved_under) as loader:
        reference = take(loader, 20)
    with loader_of(dataset, saved_under) as loader:
        take(loader, 7)
        state = roundtrip(loader.save_state_rank())
    with loader_of(dataset, restored_under) as restored:
        restored.restore_state_rank(state)
        assert take(restored, 13) == reference[7:]


def test_spawned_workers_continue_a_thread_state(dataset: str) -> None:
    with loader_of(dataset, "thread", workers=1) as loader:
        reference = take(loader, 9)
    with loader_of(dataset, "thread", workers=1) as loader:
        take(loader, 4)
        state = roundtrip(loader.save_state_rank())
    with loader_of(dataset, "spawn", workers=1) as restored:
        restored.restore_state_rank(state)
        assert take(restored, 5) == reference[4:]


def _global(loaders: list[Loader], steps: int) -> list[Any]:
    iterators = [iter(loader) for loader in loaders]
    return [rank_free(fingerprint(next(it))) for _ in range(steps) for it in iterators]


@pytest.mark.parametrize("worker_type", ["thread", "main"])
def test_elastic_restore_2x2_to_1x4(dataset: str, worker_type: str) -> None:
    def ranks(world: int, workers: int, kind: str) -> list[Loader]:
        return [loader_of(dataset, kind, workers, world=world, rank=r) for r in range(world)]

    reference = _global(ranks(2, 2, "fork"), 10)
    saved = ranks(2, 2, worker_type)
    _global(saved, 4)
    states = [roundtrip(loader.save_state_rank()) for loader in saved]
    resumed = ranks(1, 4, worker_type)
    resumed[0].restore_state_global(states)
    assert _global(resumed, 12) == reference[8:20]
    for loader in [*saved, *resumed]:
        loader.close()


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_texts(tmp_path_factory.mktemp("worker_types_packing") / "texts.jsonl", 48)


@pytest.mark.parametrize("worker_type", TYPES)
def test_contract_packing_over_worker_types(texts: Path, worker_type: str) -> None:
    def make() -> Loader:
        return packing_loader(texts, RandomPacking(8, min_fill=13), 2, packing_buffer_size=8)

    run_contract(as_type(make, worker_type), total=16, midpoints=[0, 2, 5, 11])
    with as_type(make, "fork")() as fork, as_type(make, worker_type)() as other:
        assert take(other, 12) == take(fork, 12)


class SourceAndIndex(DefaultTaskEncoder):  # type: ignore[type-arg]
    @stateless
    def encode_sample(self, sample: Any) -> str:
        return f"{sample['json']['src']}:{sample['json']['i']}"

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


@pytest.fixture(scope="module")
def blend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return jsonl_blend(tmp_path_factory.mktemp("worker_types_blend"), {"a": 30, "b": 18},
                       "blend.yaml", "    blend:\n      - {path: a.jsonl, weight: 2}\n"
                       "      - {path: b.jsonl, weight: 1}\n")  # fmt: skip


@pytest.mark.parametrize("worker_type", TYPES)
def test_contract_blend_over_worker_types(blend: Path, worker_type: str) -> None:
    def make() -> Loader:
        return loader_of(str(blend), worker_type, virtual_workers=2, task_encoder=SourceAndIndex())

    run_contract(make, total=24, midpoints=[0, 3, 9, 17])
    fork = loader_of(str(blend), "fork", virtual_workers=2, task_encoder=SourceAndIndex())
    with fork, make() as other:
        assert take(other, 16) == take(fork, 16)


def test_unknown_worker_type_is_a_clear_error(dataset: str) -> None:
    with pytest.raises(ConfigError, match=r"worker_type='threads' is not a worker type"):
        loader_of(dataset, "threads")


def test_energon_worker_classes_name_worker_types(dataset: str) -> None:
    class ThreadDataLoaderWorker:  # what Energon's #162 passes: its worker class
        pass

    loader = get_loader(loader_of(dataset, "fork").dataset, worker_type=ThreadDataLoaderWorker)
    assert loader.worker_type == "thread"
    assert json.dumps(roundtrip(loader.save_state_rank()))  # plain data, as under any type
