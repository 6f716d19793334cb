"""The save/restore contract over the loader's configurations, and elastic restores."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    CaptioningSample,
    DefaultTaskEncoder,
    SampleDecoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
    stateless,
)
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.runtime.loader import Loader
from tests.conftest import write_shard
from tests.contract.contract import (
    fingerprint,
    rank_free,
    roundtrip,
    run_contract,
    take,
    write_text_dataset,
)

MIDPOINTS = [0, 1, 3, 4, 7, 10, 13]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """6 shards x 7 text samples (42), prepared as TextSample."""
    return write_text_dataset(tmp_path_factory.mktemp("contract") / "ds")


class Augmenting(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Two outputs per sample, each with random numbers drawn from the sample's own seed."""

    decoder = SampleDecoder()

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: Any) -> Iterator[Any]:
        for copy in range(2):
            noise = torch.rand(3)
            yield {"key": sample.__key__, "copy": copy, "noise": noise, "r": random.random()}

    def batch(self, samples: list[Any]) -> Any:
        return {
            "keys": [s["key"] for s in samples],
            "copies": [s["copy"] for s in samples],
            "noise": torch.stack([s["noise"] for s in samples]),
            "r": [s["r"] for s in samples],
        }


def train_loader(path: str, workers: int, **options: Any) -> Callable[[], Loader]:
    def make() -> Loader:
        config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
        dataset = get_train_dataset(
            path,
            worker_config=config,
            batch_size=options.get("batch_size", 4),
            shuffle_buffer_size=options.get("shuffle_buffer_size", 5),
            max_samples_per_sequence=options.get("max_samples_per_sequence", 3),
            virtual_workers=options.get("virtual_workers", 2),
            **{k: v for k, v in options.items() if k in ("repeat", "task_encoder")},
        )
        return get_loader(dataset)

    return make


@pytest.mark.parametrize("workers", [0, 2])
def test_contract_train_across_epochs(dataset: str, workers: int) -> None:
    # 42 samples, batch 4, 2 streams of 21: 6 batches per stream per epoch; 30 batches = 2.5 epochs
    run_contract(train_loader(dataset, workers), total=30, midpoints=[*MIDPOINTS, 12, 23])


def test_contract_generator_encoder_with_restored_seeds(dataset: str) -> None:
    make = train_loader(dataset, 2, task_encoder=Augmenting(), batch_size=3)
    run_contract(make, total=20, midpoints=MIDPOINTS)
    with make() as loader:
        batches = [next(iter(loader)) for _ in range(1)]
    assert batches[0]["copies"][:2] == [0, 1]  # outputs of one sample can straddle batches


def test_contract_one_epoch_passes(dataset: str) -> None:
    # repeat=False: a pass ends after the epoch; the next `for` continues with the next epoch
    run_contract(train_loader(dataset, 2, repeat=False), total=25, midpoints=[0, 5, 11, 12, 19])


def test_contract_val(dataset: str) -> None:
    def make() -> Loader:
        config = WorkerConfig(rank=0, world_size=1, num_workers=2)
        return get_loader(get_val_dataset(dataset, split_part="train", worker_config=config,
                                          batch_size=5))  # fmt: skip

    run_contract(make, total=12, midpoints=[0, 2, 5, 8])


def test_restore_is_independent_of_worker_count(dataset: str) -> None:
    with train_loader(dataset, 2, virtual_workers=4)() as loader:
        reference = take(loader, 20)
    with train_loader(dataset, 2, virtual_workers=4)() as loader:
        take(loader, 7)
        state = roundtrip(loader.save_state_rank())
    for workers in (0, 1, 4):
        with train_loader(dataset, workers, virtual_workers=4)() as restored:
            restored.restore_state_rank(state)
            assert take(restored, 13) == reference[7:]


def test_restore_with_fewer_workers_adopts_the_saved_virtual_workers(dataset: str) -> None:
    """Without an explicit virtual_workers, the default (ranks x workers) of the first run is
    kept by a restore with fewer workers; more workers than it allows is a clear error."""
    defaulted = {"virtual_workers": None}
    with train_loader(dataset, 2, **defaulted)() as loader:
        reference = take(loader, 16)
    with train_loader(dataset, 2, **defaulted)() as loader:
        take(loader, 5)
        state = roundtrip(loader.save_state_rank())
    assert state["topology"]["virtual_workers"] == 2
    for workers in (0, 1):  # defaults of 1 stream, adopted as 2
        with train_loader(dataset, workers, **defaulted)() as restored:
            restored.restore_state_rank(state)
            assert take(restored, 11) == reference[5:]
            assert restored.save_state_rank()["topology"]["virtual_workers"] == 2
    with (
        train_loader(dataset, 3, **defaulted)() as restored,
        pytest.raises(ConfigError, match=r"virtual_workers=2 streams.*1 rank\(s\) x 3 worker\(s\)"),
    ):
        restored.restore_state_rank(state)


def _rank_loaders(path: str, world: int, workers: int) -> list[Loader]:
    loaders = []
    for rank in range(world):
        config = WorkerConfig(rank=rank, world_size=world, num_workers=workers)
        ds = get_train_dataset(path, worker_config=config, batch_size=4, shuffle_buffer_size=5,
                               max_samples_per_sequence=3, virtual_workers=4)  # fmt: skip
        loaders.append(get_loader(ds))
    return loaders


def _global(loaders: list[Loader], steps: int) -> list[Any]:
    """Global micro-batches in canonical order: step t holds rank 0's, rank 1's, ..."""
    iterators = [iter(loader) for loader in loaders]
    return [rank_free(fingerprint(next(it))) for _ in range(steps) for it in iterators]


@pytest.mark.parametrize(("world", "workers"), [(2, 2), (1, 4), (4, 1), (1, 0)])
def test_elastic_restore_gives_the_same_global_batches(
    dataset: str, world: int, workers: int
) -> None:
    reference = _global(_rank_loaders(dataset, 2, 2), 12)  # 24 global micro-batches
    saved = _rank_loaders(dataset, 2, 2)
    _global(saved, 4)  # 8 micro-batches consumed
    states = [roundtrip(loader.save_state_rank()) for loader in saved]
    resumed = _rank_loaders(dataset, world, workers)
    for loader in resumed:
        loader.restore_state_global(states)
    assert _global(resumed, 16 // world) == reference[8:24]
    for loader in [*saved, *resumed]:
        loader.close()


def test_same_topology_from_the_start_gives_same_global_batches(dataset: str) -> None:
    """Energon's reproducible-scaling example: 4 ranks x 1 worker == 1 rank x 4 workers."""
    assert _global(_rank_loaders(dataset, 4, 1), 5) == _global(_rank_loaders(dataset, 1, 4), 20)


def test_restore_under_another_configuration_lists_each_difference(dataset: str) -> None:
    with train_loader(dataset, 0)() as loader:
        take(loader, 2)
        state = roundtrip(loader.save_state_rank())
    other = train_loader(dataset, 0, shuffle_buffer_size=9, max_samples_per_sequence=4)()
    with pytest.raises(ConfigError) as info:
        other.restore_state_rank(state)
    message = info.value.message
    assert "shuffle_buffer_size: saved 5, current 9" in message
    assert "max_samples_per_sequence: saved 3, current 4" in message


def test_state_is_plain_small_data(dataset: str, tmp_path: Path) -> None:
    with train_loader(dataset, 2)() as loader:
        take(loader, 5)
        state = loader.save_state_rank()
    assert state == roundtrip(state)
    torch.save(state, tmp_path / "s.pt")
    assert torch.load(tmp_path / "s.pt", weights_only=True) == state
    assert len(str(state)) < 10_000


def test_samples_are_captioning_batches_after_restore(tmp_path: Path) -> None:
    """A typed dataset (images) restores too; the batch type survives."""
    from io import BytesIO

    from PIL import Image

    def jpeg(i: int) -> bytes:
        buf = BytesIO()
        Image.new("RGB", (8, 8), (i * 20 % 256, 0, 0)).save(buf, "JPEG")
        return buf.getvalue()

    root = tmp_path / "img"
    for s in range(2):
        write_shard(
            root / f"{s}.tar", [(f"{s}_{i}", {"jpg": jpeg(i), "txt": b"c"}) for i in range(6)]
        )
    yaml = make_dataset_yaml("CaptioningSample", {"image": "jpg", "caption": "txt"})
    prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=yaml)
    make = train_loader(str(root), 0)
    run_contract(make, total=8, midpoints=[0, 3, 5])
    with make() as loader:
        batch = next(iter(loader))
    assert isinstance(batch, CaptioningSample) and batch.image.shape[1:] == (3, 8, 8)


def test_itertools_islice_does_not_lose_batches(dataset: str) -> None:
    """Breaking out of a `for` keeps the position: the next loop continues, nothing skipped."""
    with train_loader(dataset, 2)() as loader:
        first = [fingerprint(b) for b in itertools.islice(loader, 3)]
        second = [fingerprint(b) for b in itertools.islice(loader, 3)]
    with train_loader(dataset, 2)() as loader:
        assert take(loader, 6) == first + second
