"""``restore_sample`` with a generator ``encode_sample``: each output's key names which output it
was and the ``current_sample_index`` its hook saw, so a restored batch equals the one the loader
gave (two outputs of one sample may sit in two batches), in two worker processes."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless
from tests.contract.contract import fingerprint
from tests.integration.test_mix_batch import write_ids


class TwoOutputs(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Two outputs per sample, each with the hook indices it saw and a seeded random number."""

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: Any) -> Iterator[dict[str, Any]]:
        for output in range(2):
            yield {"__restore_key__": sample["__restore_key__"], "id": sample["json"]["id"],
                   "output": output, "batch_index": self.current_batch_index,
                   "sample_index": self.current_sample_index,
                   "r": random.randint(0, 10**6)}  # fmt: skip

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {"__restore_key__": (), **{k: [s[k] for s in samples] for k in samples[0]}}


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ids(tmp_path_factory.mktemp("restore_generator") / "ids.jsonl", 0, 30)


@pytest.mark.parametrize(("workers", "virtual_workers"), [(0, 1), (2, 2)])
def test_batches_of_generator_outputs_are_restored_from_their_keys(
    ids: Path, workers: int, virtual_workers: int
) -> None:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    dataset = get_train_dataset(str(ids), batch_size=3, worker_config=wc, task_encoder=TwoOutputs(),
                                shuffle_buffer_size=5, max_samples_per_sequence=4,
                                virtual_workers=virtual_workers)  # fmt: skip
    loader = get_loader(dataset)
    assert loader.can_restore_sample()
    batches = list(itertools.islice(loader, 8))
    for t, batch in enumerate(batches):
        assert batch["batch_index"] == [t] * 3
        restored = loader.restore_sample(batch["__restore_key__"])
        assert fingerprint(restored) == fingerprint(batch)
    # the first batch: both outputs of the stream's first sample, then the next sample's first
    assert batches[0]["output"] == [0, 1, 0]
    first = batches[0]["sample_index"]
    assert first[0] == first[1] != first[2]
    # the stream's next batch (the rank's batch number virtual_workers) starts with the second
    # output of the sample whose first output ended the first batch
    following = batches[virtual_workers]
    assert following["output"][0] == 1 and following["sample_index"][0] == first[2]
    one = loader.restore_sample(following["__restore_key__"][2])
    assert one["output"] == 1 and one["r"] == following["r"][0]
    assert one["sample_index"] == first[2]
