"""``loader.restore_sample(key)``: samples, packed samples and batches loaded again from their
``__restore_key__``, in two worker processes, equal to what the loader gave."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless
from stoker.errors import ConfigError
from tests.contract.contract import fingerprint
from tests.integration.test_mix_batch import write_ids


class PackIds(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Packs of three samples' word tensors, in dict batches that keep restore keys."""

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        line = sample["json"]
        words = torch.full((len(line["text"].split()),), line["id"])
        return {"__key__": sample["__key__"], "__restore_key__": sample["__restore_key__"],
                "id": line["id"], "words": words}  # fmt: skip

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        return [samples[i : i + 3] for i in range(0, len(samples), 3)]

    @stateless
    def pack_selected_samples(self, samples: list[Any]) -> dict[str, Any]:
        return {"__restore_key__": (), "ids": [s["id"] for s in samples],
                "words": torch.cat([s["words"] for s in samples])}  # fmt: skip

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        return {"__restore_key__": (), "ids": [s["ids"] for s in samples],
                "sizes": torch.tensor([len(s["words"]) for s in samples])}  # fmt: skip


@pytest.fixture(scope="module")
def ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_ids(tmp_path_factory.mktemp("restore_sample") / "ids.jsonl", 0, 40)


def test_packed_batches_are_restored_from_their_keys(ids: Path) -> None:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    dataset = get_train_dataset(str(ids), batch_size=2, worker_config=wc, packing_buffer_size=6,
                                task_encoder=PackIds(), shuffle_buffer_size=5,
                                max_samples_per_sequence=4)  # fmt: skip
    loader = get_loader(dataset)
    assert loader.can_restore_sample()
    for batch in itertools.islice(loader, 6):
        key = batch["__restore_key__"]
        assert key[0] == "BatchDataset" and all(k[0] == "PackingDataset" for k in key[2:])
        assert fingerprint(loader.restore_sample(key)) == fingerprint(batch)
        pack = loader.restore_sample(key[2])
        assert pack["ids"] == batch["ids"][0] and pack["__restore_key__"] == key[2]


def test_a_key_from_elsewhere_is_refused(ids: Path) -> None:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    dataset = get_train_dataset(str(ids), batch_size=2, worker_config=wc,
                                shuffle_buffer_size=None,
                                max_samples_per_sequence=None)  # fmt: skip
    loader = get_loader(dataset)
    with pytest.raises(ConfigError, match="names dataset"):
        loader.restore_sample(("Webdataset", "/elsewhere", 3))
    with pytest.raises(ConfigError, match="not a restore key"):
        loader.restore_sample(("something", 1))
    with pytest.raises(ConfigError, match="has 40 samples"):
        loader.restore_sample(("Webdataset", str(ids), 40))


def test_items_of_a_concatenation_are_restored_from_the_right_dataset(
    ids: Path, tmp_path: Path
) -> None:
    from stoker import ConcatDataset, get_val_dataset

    other = write_ids(tmp_path / "other.jsonl", 1000, 5)
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    parts = [get_val_dataset(str(p), split_part="train", batch_size=2, worker_config=wc)
             for p in (ids, other)]  # fmt: skip
    loader = get_loader(ConcatDataset(*parts, worker_config=wc))
    assert loader.can_restore_sample()
    batches = list(loader)
    assert {b["json"]["id"][0] >= 1000 for b in batches} == {True, False}
    for batch in batches:
        assert fingerprint(loader.restore_sample(batch["__restore_key__"])) == fingerprint(batch)
