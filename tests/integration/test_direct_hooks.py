"""The per-sample fast paths of a stream, in real loaders at W=0 and W=2: an ``encode_sample``
that returns one output is called directly (skips counted, failures skipped by the policy, the
hook indices as Energon sets them), a plain function that returns a generator still gives its
outputs as they are taken, cookers see the hook indices, and the default identity hook keeps the
restore keys that ``restore_sample`` needs."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    Cooker,
    DefaultTaskEncoder,
    ErrorPolicy,
    SkipSample,
    TextSample,
    WorkerConfig,
    basic_sample_keys,
    get_loader,
    get_train_dataset,
    get_val_dataset,
)
from tests.integration.test_mix_batch import write_ids


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ids(tmp_path_factory.mktemp("direct_hooks") / "ids.jsonl", 0, 40)


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


class Indexed(DefaultTaskEncoder):  # type: ignore[type-arg]
    """One output per sample with the hook indices it saw; skips ids % 7 == 3, fails on 11."""

    def encode_sample(self, sample: Any) -> dict[str, Any]:
        i = sample["json"]["id"]
        if i % 7 == 3:
            raise SkipSample()
        if i == 11:
            raise ValueError("id 11 is broken")
        return {"__restore_key__": sample["__restore_key__"], "id": i,
                "batch_index": self.current_batch_index,
                "sample_index": self.current_sample_index}  # fmt: skip

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {"__restore_key__": (), **{k: [s[k] for s in samples] for k in samples[0]}}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_direct_hook_counts_skips_and_failures_and_sees_its_batch_index(
    ids: Path, workers: int
) -> None:
    dataset = get_val_dataset(
        str(ids), batch_size=4, worker_config=config(workers), task_encoder=Indexed(),
        error_policy=ErrorPolicy(mode="skip"),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        batches = list(loader)
        skipped = loader.skipped()
        restored = loader.restore_sample(batches[1]["__restore_key__"])
    got = sorted(i for batch in batches for i in batch["id"])
    assert got == [i for i in range(40) if i % 7 != 3 and i != 11]
    assert skipped.by_reason == {"encode_sample: SkipSample": 6, "loading: ValueError": 1}
    for t, batch in enumerate(batches[:-1]):  # (the last: where its stream's slot fell)
        assert batch["batch_index"] == [t] * len(batch["id"])
    indices = [i for batch in batches for i in batch["sample_index"]]
    assert len(set(indices)) == len(indices)  # unique on the rank
    assert restored["id"] == batches[1]["id"]
    assert restored["sample_index"] == batches[1]["sample_index"]


class Returns(DefaultTaskEncoder):  # type: ignore[type-arg]
    """A plain function returning a generator: each output is made as it is taken."""

    def encode_sample(self, sample: Any) -> Any:
        i = sample["json"]["id"]
        return ({"id": i, "k": k, "batch_index": self.current_batch_index} for k in range(i % 3))

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {k: [s[k] for s in samples] for k in samples[0]}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_returned_generator_gives_its_outputs_as_they_are_taken(ids: Path, workers: int) -> None:
    dataset = get_val_dataset(
        str(ids), batch_size=5, worker_config=config(workers), task_encoder=Returns()
    )
    with get_loader(dataset) as loader:
        batches = list(loader)
    pairs = sorted((i, k) for b in batches for i, k in zip(b["id"], b["k"], strict=True))
    assert pairs == [(i, k) for i in range(40) for k in range(i % 3)]
    for t, batch in enumerate(batches):  # outputs of one sample may fall in two batches
        assert batch["batch_index"] == [t] * len(batch["id"])


def cook_indexed(sample: dict[str, Any]) -> TextSample:
    return TextSample(**basic_sample_keys(sample), text=str(sample["json"]["id"]))


class Cooking(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Cooks each line; the cooker and encode_sample note the sample index they saw."""

    def __init__(self) -> None:
        super().__init__()
        self.cookers = [Cooker(self.cook)]

    def cook(self, sample: dict[str, Any]) -> TextSample:
        cooked = cook_indexed(sample)
        cooked.text = f"{cooked.text}@{self.current_sample_index}"
        return cooked

    def encode_sample(self, sample: TextSample) -> TextSample:
        sample.text = f"{sample.text}@{self.current_sample_index}"
        return sample


@pytest.mark.parametrize("workers", [0, 2])
def test_cookers_see_the_hook_indices_of_their_sample(ids: Path, workers: int) -> None:
    dataset = get_train_dataset(
        str(ids), batch_size=4, worker_config=config(workers), task_encoder=Cooking(),
        shuffle_buffer_size=5, max_samples_per_sequence=8,
    )  # fmt: skip
    with get_loader(dataset) as loader:
        texts = [t for batch in itertools.islice(loader, 12) for t in batch.text]
    seen = [t.split("@") for t in texts]
    assert all(cooked == encoded for _, cooked, encoded in seen)
    assert len({encoded for _, _, encoded in seen}) == len(seen)
    assert sorted(int(i) for i, _, _ in seen[:40]) == list(range(40))  # one epoch first


@pytest.mark.parametrize("workers", [0, 2])
def test_the_identity_hook_keeps_keys_that_restore_samples(ids: Path, workers: int) -> None:
    class Cooked(DefaultTaskEncoder):  # type: ignore[type-arg]
        cookers = [Cooker(cook_indexed)]  # noqa: RUF012

    dataset = get_train_dataset(
        str(ids), batch_size=4, worker_config=config(workers), task_encoder=Cooked(),
        shuffle_buffer_size=5, max_samples_per_sequence=8,
    )  # fmt: skip
    with get_loader(dataset) as loader:
        batches = list(itertools.islice(loader, 6))
        for batch in batches:
            assert all(len(key) == 5 for key in batch.__restore_key__[2:])
            restored = loader.restore_sample(batch.__restore_key__)
            assert restored.text == batch.text and restored.__key__ == batch.__key__
