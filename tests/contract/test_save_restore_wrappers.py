"""The save/restore contract over Energon's dataset wrappers, in one process and in two workers.

Each wrapper stores its own state in the stream position, so a loader restored after ``m``
outputs must continue exactly as the uninterrupted one, including inside a generator's outputs,
across repetitions and concatenated datasets, and inside buffers that are replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    BatchDataset,
    BlendDataset,
    ConcatDataset,
    EpochizeDataset,
    FilterDataset,
    GroupBatchDataset,
    IterMapDataset,
    LimitDataset,
    MapDataset,
    MixBatchDataset,
    PackingDataset,
    RepeatDataset,
    ShuffleBufferDataset,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    get_val_dataset,
)
from stoker.runtime.loader import Loader
from stoker.runtime.streams import Loadable
from tests.contract.contract import fingerprint, roundtrip, run_contract, take
from tests.integration.test_mix_batch import write_ids

MIDPOINTS = [0, 1, 4, 11, 17]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("wrappers_contract")
    return {"a": write_ids(root / "a.jsonl", 0, 30), "b": write_ids(root / "b.jsonl", 1000, 20)}


def id_of(sample: Any) -> int:
    return int(sample["json"]["id"])


def ids(path: Path, wc: WorkerConfig, *, train: bool = False) -> MapDataset:
    if train:
        inner = get_train_dataset(str(path), batch_size=None, worker_config=wc,
                                  shuffle_buffer_size=4, max_samples_per_sequence=3)  # fmt: skip
    else:
        inner = get_val_dataset(str(path), split_part="train", batch_size=None, worker_config=wc)
    return MapDataset(inner, id_of, worker_config=wc)


def thrice_unless_seven(i: int) -> Iterator[int]:
    """Three outputs per input (a restore lands inside them); multiples of 7 give none."""
    if i % 7:
        yield from (i, i + 100, i + 200)


def halves(batch: list[int]) -> Iterator[list[int]]:
    yield batch[: len(batch) // 2]
    yield batch[len(batch) // 2 :]


def pairs(items: Iterator[int]) -> Iterator[int]:
    for x, y in zip(items, items, strict=False):
        yield x * 1000 + y


WRAPPERS: dict[str, Callable[[dict[str, Path], WorkerConfig], Loadable]] = {
    "map_generator": lambda d, wc: MapDataset(ids(d["a"], wc), thrice_unless_seven,
                                              worker_config=wc),
    "batch_generator": lambda d, wc: BatchDataset(ids(d["a"], wc, train=True), 5, halves,
                                                  worker_config=wc),
    "limit_repeat": lambda d, wc: LimitDataset(RepeatDataset(ids(d["b"], wc), worker_config=wc),
                                               45, worker_config=wc),
    "repeat_fraction": lambda d, wc: RepeatDataset(ids(d["b"], wc), repeats=2.5,
                                                   worker_config=wc),
    "epochize": lambda d, wc: EpochizeDataset(RepeatDataset(ids(d["b"], wc), worker_config=wc),
                                              9, wc),
    "blend": lambda d, wc: BlendDataset((ids(d["a"], wc, train=True), 1),
                                        (ids(d["b"], wc, train=True), 2), worker_config=wc),
    "concat": lambda d, wc: ConcatDataset(ids(d["b"], wc), FilterDataset(
        ids(d["a"], wc), filter_fn=lambda i: i % 3 != 0, worker_config=wc), worker_config=wc),
    "shuffle_buffer": lambda d, wc: ShuffleBufferDataset(ids(d["a"], wc), 5, worker_config=wc),
    "group_batch": lambda d, wc: GroupBatchDataset(ids(d["a"], wc, train=True), None,
                                                   lambda i: (i % 2, 2 + i % 2), batcher=list,
                                                   worker_config=wc),
    "packing": lambda d, wc: PackingDataset(ids(d["a"], wc), 5,
                                            pre_packer=lambda xs: [xs[:1], xs[1:3], xs[3:]],
                                            final_packer=tuple, worker_config=wc),
    "iter_map": lambda d, wc: IterMapDataset(ids(d["a"], wc), pairs, worker_config=wc),
    "mix_of_batches": lambda d, wc: MixBatchDataset(
        (BatchDataset(ids(d["a"], wc, train=True), 2, list, worker_config=wc), 1),
        (BatchDataset(ids(d["b"], wc, train=True), 3, list, worker_config=wc), 1),
        batch_size=2, worker_config=wc),
}  # fmt: skip


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_contract_wrappers(data: dict[str, Path], name: str, workers: int) -> None:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)

    def make() -> Loader:
        return get_savable_loader(WRAPPERS[name](data, wc))

    run_contract(make, total=20, midpoints=MIDPOINTS)


def test_state_of_a_wrapper_mismatch_is_reported(data: dict[str, Path]) -> None:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    with get_savable_loader(LimitDataset(ids(data["a"], wc), 10, worker_config=wc)) as loader:
        take(loader, 3)
        state = roundtrip(loader.save_state_rank())
    other = get_savable_loader(LimitDataset(ids(data["a"], wc), 11, worker_config=wc))
    with pytest.raises(Exception, match="wrappers"):
        other.restore_state_rank(state)


def test_restore_into_more_workers(data: dict[str, Path]) -> None:
    """Saved with one worker over two streams, restored with two workers: same continuation."""

    def make(workers: int) -> Loader:
        wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
        inner = get_train_dataset(str(data["a"]), batch_size=None, worker_config=wc,
                                  shuffle_buffer_size=4, max_samples_per_sequence=3,
                                  virtual_workers=2)  # fmt: skip
        numbers = MapDataset(inner, id_of, worker_config=wc)
        mapped = MapDataset(numbers, thrice_unless_seven, worker_config=wc)
        return get_savable_loader(BatchDataset(mapped, 4, halves, worker_config=wc))

    with make(1) as loader:
        reference = take(loader, 20)
    with make(1) as loader:
        head = take(loader, 7)
        state = roundtrip(loader.save_state_rank())
    with make(2) as restored:
        restored.restore_state_rank(state)
        assert head + take(restored, 13) == reference


def test_two_ranks_restore_globally_on_other_worker_counts(data: dict[str, Path]) -> None:
    """Each rank's state of a wrapped dataset, merged and cut again for ranks with another
    number of workers, continues each rank's batches exactly."""

    def make(rank: int, workers: int) -> Loader:
        wc = WorkerConfig(rank=rank, world_size=2, num_workers=workers)
        inner = get_train_dataset(str(data["a"]), batch_size=None, worker_config=wc,
                                  shuffle_buffer_size=4, max_samples_per_sequence=3,
                                  virtual_workers=4)  # fmt: skip
        mapped = MapDataset(MapDataset(inner, id_of, worker_config=wc), thrice_unless_seven,
                            worker_config=wc)  # fmt: skip
        return get_savable_loader(BatchDataset(mapped, 3, halves, worker_config=wc))

    reference, states = [], []
    for rank in (0, 1):
        with make(rank, 2) as loader:
            reference.append(take(loader, 15))
        with make(rank, 2) as loader:
            assert take(loader, 6) == reference[rank][:6]
            states.append(roundtrip(loader.save_state_rank()))
    for rank in (0, 1):
        with make(rank, 1) as restored:
            restored.restore_state_global(states)
            assert take(restored, 9) == reference[rank][6:]


@pytest.mark.parametrize("workers", [0, 2])
def test_megatron_validation_pattern(tmp_path: Path, workers: int) -> None:
    """Megatron-LM's validation loader: a packed, batched validation dataset, repeated and
    limited per pass; every pass gives the same batches, and restores are exact."""
    from tests.integration.test_packing import Packing, write_texts

    texts = write_texts(tmp_path / "texts.jsonl", 40)
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)

    def make() -> Loader:
        val = get_val_dataset(str(texts), split_part="train", batch_size=2, worker_config=wc,
                              packing_buffer_size=6, task_encoder=Packing(6))  # fmt: skip
        repeated = RepeatDataset(val, worker_config=wc)
        return get_savable_loader(LimitDataset(repeated, 13, worker_config=wc,
                                               reset_after_epoch=True))  # fmt: skip

    with make() as loader:
        passes = [[fingerprint(batch) for batch in loader] for _ in range(2)]
    assert len(passes[0]) == 13 and passes[0] == passes[1]
    run_contract(make, total=20, midpoints=[0, 2, 9, 13, 17])


def test_buffers_restore_from_the_oldest_item_held(data: dict[str, Path]) -> None:
    """A restore of a shuffle buffer re-reads from its oldest item, not from the pass start."""
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)

    def make() -> Loader:
        return get_savable_loader(ShuffleBufferDataset(ids(data["a"], wc, train=True), 4,
                                                       worker_config=wc))  # fmt: skip

    with make() as loader:
        head = take(loader, 300)
        state = roundtrip(loader.save_state_rank())
        reference = take(loader, 10)
    (position,) = state["streams"].values()
    anchor, read, done = position[-3:]
    assert done == 300 and 300 <= read <= 304 and read - anchor < 40
    assert len(state["buffers"]["0"]["own"]["held"]) == read - 300
    with make() as restored:
        restored.restore_state_rank(state)
        assert take(restored, 10) == reference
    assert len(head) == 300
