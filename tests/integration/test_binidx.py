"""Megatron token datasets (``.bin`` + ``.idx`` written by megatron-core) load as any dataset.

Every sequence equals megatron-core's ``IndexedDataset`` reading of it (several dtypes, documents
of several sequences, named by the ``.bin``, the ``.idx`` or the bare prefix), with 0 and 2 real
worker processes; subsets and subflavors apply; a 3:1 blend with a webdataset keeps its share; a
loader restored mid-epoch continues exactly.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.runtime.loader import Loader
from tests.contract.contract import run_contract
from tests.integration._remote import prepare_local
from tests.integration._tokens import reference, write_tokens

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
DTYPES = [np.uint8, np.uint16, np.int32, np.int64]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A token dataset per dtype (its prefix), 60 documents each."""
    root = tmp_path_factory.mktemp("tokens")
    return {
        np.dtype(t).name: write_tokens(root / f"corpus_{np.dtype(t).name}", t, 60, seed=i)
        for i, t in enumerate(DTYPES)
    }


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


def samples(dataset: Any) -> list[Any]:
    with get_loader(dataset) as loader:
        return list(loader)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("dtype", [np.dtype(t).name for t in DTYPES])
def test_every_sequence_equals_megatron_cores_reading(
    corpora: dict[str, Path], dtype: str, workers: int
) -> None:
    prefix = corpora[dtype]
    ref = reference(prefix)
    assert len(ref.document_indices) == 61 and len(ref) > 61  # documents of several sequences
    for name in (str(prefix), f"{prefix}.bin", f"{prefix}.idx"):
        dataset = get_val_dataset(
            name, split_part="train", worker_config=config(workers), batch_size=None
        )
        got = samples(dataset)
        keys = [int(s["__key__"]) for s in got]
        assert sorted(keys) == list(range(len(ref)))  # one pass: each sequence once
        assert workers or keys == sorted(keys)  # in order (the workers interleave)
        for sample in got:
            expected = ref[int(sample["__key__"])]
            assert sample["tokens"].dtype == expected.dtype == np.dtype(dtype)
            assert np.array_equal(sample["tokens"], expected)
            assert sample["__sources__"][0].shard_name == f"{prefix.name}.bin"


def test_shuffled_epoch_is_a_permutation_of_the_sequences(corpora: dict[str, Path]) -> None:
    prefix = corpora["int32"]
    count = len(reference(prefix))
    dataset = get_train_dataset(
        str(prefix), worker_config=config(2), batch_size=None, shuffle_buffer_size=20,
        max_samples_per_sequence=5, repeat=False,
    )  # fmt: skip
    keys = [int(s["__key__"]) for s in samples(dataset)]
    assert sorted(keys) == list(range(count)) and keys != sorted(keys)


def test_subset_and_subflavors_of_a_metadataset_entry(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    prefix = corpora["uint16"]
    count = len(reference(prefix))
    yaml = tmp_path / "mds.yaml"
    yaml.write_text(
        HEADER + f"  train:\n    path: {prefix}\n    subset: {{range: [0%, 50%]}}\n"
        "    subflavors: {kind: tokens}\n"
    )
    got = samples(
        get_val_dataset(str(yaml), split_part="train", worker_config=config(0), batch_size=None)
    )
    assert [int(s["__key__"]) for s in got] == list(range(count // 2))
    assert all(s["__subflavors__"] == {"kind": "tokens"} for s in got)


def test_three_to_one_blend_with_a_webdataset_keeps_its_share(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    texts = prepare_local(tmp_path, "texts", shards=3, per_shard=50)
    yaml = tmp_path / "blend.yaml"
    yaml.write_text(
        HEADER + "  train:\n    blend:\n"
        f"      - weight: 3\n        path: {corpora['int32']}.bin\n"
        f"      - weight: 1\n        path: {texts}\n"
    )
    dataset = get_train_dataset(
        str(yaml), worker_config=config(2), batch_size=None, shuffle_buffer_size=10,
        max_samples_per_sequence=10,
    )  # fmt: skip
    counts: collections.Counter[str] = collections.Counter()
    with get_loader(dataset) as loader:
        for n, sample in enumerate(loader):
            counts["tokens" if isinstance(sample, dict) else "text"] += 1
            if n == 7999:
                break
    assert abs(counts["tokens"] / 8000 - 0.75) < 0.02, counts


@pytest.mark.parametrize("workers", [0, 2])
def test_restore_mid_epoch_continues_exactly(corpora: dict[str, Path], workers: int) -> None:
    prefix = corpora["uint16"]

    def make() -> Loader:
        dataset = get_train_dataset(
            f"{prefix}.bin", worker_config=config(workers), batch_size=4, shuffle_buffer_size=8,
            max_samples_per_sequence=6, virtual_workers=2,
        )  # fmt: skip
        return get_loader(dataset)

    count = len(reference(prefix))
    run_contract(make, total=count // 4 + 12, midpoints=[0, 7, count // 4 - 1, count // 4 + 3])
