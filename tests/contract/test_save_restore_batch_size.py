"""Restoring under another micro-batch size (Energon allows it): stream positions count
references, so the same samples follow, grouped into batches of the new size."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from stoker import TextSample, WorkerConfig, get_loader, get_train_dataset
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import write_shard
from tests.contract.contract import roundtrip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """5 shards x 9 text samples (45), prepared as TextSample."""
    root = tmp_path_factory.mktemp("rebatch") / "ds"
    for s in range(5):
        samples = [(f"s{s}_{i}", {"txt": f"{s}.{i}".encode()}) for i in range(9)]
        write_shard(root / f"shard_{s}.tar", samples)
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    return str(root)


def loaders(path: str, world: int, batch_size: int, workers: int = 2) -> list[Loader]:
    out = []
    for rank in range(world):
        config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
        ds = get_train_dataset(path, worker_config=config, batch_size=batch_size,
                               shuffle_buffer_size=5, max_samples_per_sequence=2,
                               virtual_workers=4, sample_type=TextSample)  # fmt: skip
        out.append(get_loader(ds))
    return out


def global_batches(ranks: list[Loader], steps: int, accumulation: int) -> list[list[str]]:
    """The sorted texts of ``steps`` global batches of ``accumulation`` micro-batches per rank."""
    iterators = [iter(loader) for loader in ranks]
    out = []
    for _ in range(steps):
        texts: list[str] = []
        for _, it in itertools.product(range(accumulation), iterators):
            texts.extend(next(it).text)
        out.append(sorted(texts))
    return out


def close(ranks: list[Loader]) -> None:
    for loader in ranks:
        loader.close()


@pytest.mark.parametrize(("world", "batch_size", "accumulation"), [(2, 2, 4), (2, 1, 8), (1, 2, 8)])
def test_restore_with_another_batch_size_gives_the_same_global_batches(
    dataset: str, world: int, batch_size: int, accumulation: int
) -> None:
    # global batch: 16 samples = 2 ranks x 2 micro-batches of 4, one from each of a rank's streams
    reference_ranks = loaders(dataset, 2, 4)
    reference = global_batches(reference_ranks, 5, 2)
    saved = loaders(dataset, 2, 4)
    global_batches(saved, 2, 2)
    states = [roundtrip(loader.save_state_rank()) for loader in saved]
    resumed = loaders(dataset, world, batch_size)
    for loader in resumed:
        loader.restore_state_global(states)
    assert global_batches(resumed, 3, accumulation) == reference[2:]
    # the batch counter counts batches of the new size
    assert resumed[0].save_state_rank()["t"] == 5 * 16 // (world * batch_size)
    close([*reference_ranks, *saved, *resumed])


def test_restore_state_rank_with_a_smaller_batch_size(dataset: str) -> None:
    (reference_loader,) = loaders(dataset, 1, 4)
    reference = [s for b in itertools.islice(reference_loader, 8) for s in b.text]
    (saved,) = loaders(dataset, 1, 4)
    list(itertools.islice(saved, 4))  # each of the rank's 4 streams made one batch of 4
    state = roundtrip(saved.save_state_rank())
    (resumed,) = loaders(dataset, 1, 2)
    resumed.restore_state_rank(state)
    assert resumed.save_state_rank()["t"] == 8
    # the next 16 samples are the same (4 streams x 4 samples), in batches of 2
    texts = [s for b in itertools.islice(resumed, 8) for s in b.text]
    assert sorted(texts) == sorted(reference[16:])
    close([reference_loader, saved, resumed])


def test_batch_size_that_splits_the_position_is_refused(dataset: str) -> None:
    (saved,) = loaders(dataset, 1, 4)
    list(itertools.islice(saved, 1))  # 4 samples in
    state = roundtrip(saved.save_state_rank())
    (other,) = loaders(dataset, 1, 3)
    with pytest.raises(ConfigError, match=r"4 samples in .* not a whole number of batches of 3"):
        other.restore_state_rank(state)
    close([saved, other])


def test_other_differences_are_still_refused(dataset: str, tmp_path: Path) -> None:
    (saved,) = loaders(dataset, 1, 4)
    list(itertools.islice(saved, 2))
    state: dict[str, Any] = roundtrip(saved.save_state_rank())
    state["fingerprint"]["shuffle_buffer_size"] = 7
    (other,) = loaders(dataset, 1, 2)
    with pytest.raises(ConfigError, match="shuffle_buffer_size: saved 7, current 5"):
        other.restore_state_rank(state)
    close([saved, other])
