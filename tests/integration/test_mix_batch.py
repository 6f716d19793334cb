"""``MixBatchDataset``: whole batches of several datasets, chosen by weight, in real workers.

Two indexed JSONL datasets with disjoint sample ids ("a": 0.., "b": 1000..) and different batch
sizes: every output must be made of whole sub-batches of one dataset each, the realised shares
must follow the weights, and workers must not change what comes out.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    MixBatchDataset,
    WorkerConfig,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    homogeneous_concat_mix,
    stateless,
)
from stoker.errors import ConfigError
from stoker.format.jsonl import prepare_jsonl
from stoker.runtime.loader import Loader
from tests.contract.contract import roundtrip, take

#: Sub-batch size of each dataset.
SUB_BATCH = {"a": 2, "b": 3}


def write_ids(path: Path, first: int, n: int) -> Path:
    """``n`` JSONL lines with ids ``first..first+n-1`` and ``id % 5 + 1`` words, indexed."""
    lines = [{"id": i, "text": " ".join(["w"] * (i % 5 + 1))} for i in range(first, first + n)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    prepare_jsonl(str(path))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mix")
    return {"a": write_ids(root / "a.jsonl", 0, 40), "b": write_ids(root / "b.jsonl", 1000, 30)}


class Ids(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Batches of ``{"ids": [...], "words": padded tensor of each sample's word count}``."""

    @stateless
    def encode_sample(self, sample: Any) -> dict[str, Any]:
        line = sample["json"]
        words = len(line["text"].split())
        return {"id": line["id"], "words": torch.full((words,), line["id"])}

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        size = max(len(s["words"]) for s in samples)
        words = torch.zeros(len(samples), size, dtype=torch.int64)
        for row, s in enumerate(samples):
            words[row, : len(s["words"])] = s["words"]
        return {"ids": [s["id"] for s in samples], "words": words}


def config(workers: int, world: int = 1, rank: int = 0) -> WorkerConfig:
    return WorkerConfig(rank=rank, world_size=world, num_workers=workers)


def sub_dataset(path: Path, wc: WorkerConfig, batch_size: int, **options: Any) -> Any:
    defaults: dict[str, Any] = {"shuffle_buffer_size": 5, "max_samples_per_sequence": 4,
                                "virtual_workers": 4, "task_encoder": Ids()}  # fmt: skip
    return get_train_dataset(str(path), worker_config=wc, batch_size=batch_size,
                             **{**defaults, **options})  # fmt: skip


def make_mix(
    data: dict[str, Path],
    workers: int = 0,
    weights: tuple[float, float] = (0.75, 0.25),
    batch_size: int = 3,
    world: int = 1,
    rank: int = 0,
    b_options: dict[str, Any] | None = None,
    **options: Any,
) -> MixBatchDataset:
    """A mix of "a" and "b"; ``options`` go to both datasets (``b_options`` to "b" only)."""
    wc = config(workers, world, rank)
    mix_fn = options.pop("batch_mix_fn", None)
    extra = {"batch_mix_fn": mix_fn} if mix_fn else {}
    subs = [
        sub_dataset(data["a"], wc, SUB_BATCH["a"], **options),
        sub_dataset(data["b"], wc, SUB_BATCH["b"], **{**options, **(b_options or {})}),
    ]
    return MixBatchDataset(*zip(subs, weights, strict=True), batch_size=batch_size,
                           worker_config=wc, **extra)  # fmt: skip


def take_raw(loader: Loader, n: int) -> list[Any]:
    """The next ``n`` batches, as they are (no more are taken from the loader)."""
    return list(itertools.islice(loader, n))


def source_of(ids: list[int]) -> str:
    """The dataset a sub-batch came from; it must not mix datasets."""
    names = {"a" if i < 1000 else "b" for i in ids}
    assert len(names) == 1, f"a sub-batch mixes datasets: {ids}"
    return names.pop()


def test_every_output_is_whole_sub_batches_of_one_dataset_each(data: dict[str, Path]) -> None:
    with get_loader(make_mix(data, workers=2)) as loader:
        outputs = take_raw(loader, 30)
    assert len(outputs) == 30
    seen = []
    for output in outputs:  # default batch_mix_fn: the list of sub-batches
        assert isinstance(output, list) and len(output) == 3
        for sub in output:
            name = source_of(sub["ids"])
            assert len(sub["ids"]) == SUB_BATCH[name]
            seen.append(name)
    assert set(seen) == {"a", "b"}


def test_realised_shares_follow_the_weights(data: dict[str, Path]) -> None:
    # 4 streams; the schedule keeps each stream within 1 sub-batch of its share (two datasets).
    with get_loader(make_mix(data, workers=2, weights=(3.0, 1.0), batch_size=4)) as loader:
        subs = [source_of(sub["ids"]) for batch in take_raw(loader, 100) for sub in batch]
    counts = Counter(subs)
    assert len(subs) == 400
    assert abs(counts["a"] - 300) <= 4, counts
    with get_loader(make_mix(data, workers=0, weights=(1.0, 4.0), batch_size=4)) as loader:
        counts = Counter(source_of(sub["ids"]) for batch in take_raw(loader, 100) for sub in batch)
    assert abs(counts["b"] - 320) <= 4, counts


def test_workers_do_not_change_the_outputs(data: dict[str, Path]) -> None:
    results = []
    for workers in (0, 1, 2):
        with get_loader(make_mix(data, workers=workers)) as loader:
            results.append(take(loader, 24))
    assert results[0] == results[1] == results[2]


def test_homogeneous_concat_mix_concatenates_and_pads(data: dict[str, Path]) -> None:
    mix = make_mix(data, workers=2, batch_mix_fn=homogeneous_concat_mix)
    with get_savable_loader(mix) as loader:
        batches = take_raw(loader, 12)
    for batch in batches:
        ids, words = batch["ids"], batch["words"]
        assert 6 <= len(ids) <= 9  # three sub-batches of 2 or 3 samples
        width = max(i % 5 + 1 for i in ids)  # padded to the longest sample of all sub-batches
        assert tuple(words.shape) == (len(ids), width)
        for row, i in enumerate(ids):  # each row: the sample's words, then zero padding
            assert words[row].tolist() == [i] * (i % 5 + 1) + [0] * (width - i % 5 - 1)


def test_samples_per_dataset_counts_the_sub_batches_taken(data: dict[str, Path]) -> None:
    with get_loader(make_mix(data, workers=2, batch_mix_fn=homogeneous_concat_mix)) as loader:
        ids = [i for batch in take_raw(loader, 15) for i in batch["ids"]]
        counts = loader.samples_per_dataset()
    assert counts == {
        str(data["a"]): sum(i < 1000 for i in ids),
        str(data["b"]): sum(i >= 1000 for i in ids),
    }


def test_finite_datasets_run_out_one_by_one(data: dict[str, Path]) -> None:
    mix = make_mix(data, workers=2, repeat=False, batch_mix_fn=homogeneous_concat_mix)
    with get_loader(mix) as loader:
        first = [i for batch in loader for i in batch["ids"]]
        second = [i for batch in loader for i in batch["ids"]]
    expected = [*range(40), *range(1000, 1030)]
    assert sorted(first) == expected  # every sample once per pass, nothing lost at the ends
    assert sorted(second) == expected
    assert first != second  # the next pass is another epoch


def test_len_counts_the_sub_batches_of_a_pass(data: dict[str, Path]) -> None:
    mix = make_mix(data, workers=0, repeat=False)
    with get_loader(mix) as loader:
        assert len(loader) == len(list(loader))


def test_restore_checks_the_mix_configuration(data: dict[str, Path]) -> None:
    with get_loader(make_mix(data)) as loader:
        take(loader, 3)
        state = roundtrip(loader.save_state_rank())
    changes: list[tuple[dict[str, Any], str]] = [
        ({"weights": (0.5, 0.5)}, "mix_batch_weights: saved"),
        ({"batch_size": 2}, "mix_batch_size: saved 3, current 2"),
        ({"max_samples_per_sequence": 2}, r"mix\[0\].max_samples_per_sequence: saved 4"),
    ]
    for change, message in changes:
        other = get_loader(make_mix(data, **change))
        with other, pytest.raises(ConfigError, match=message):
            other.restore_state_rank(state)


def test_configuration_errors_say_what_to_do(data: dict[str, Path]) -> None:
    wc = config(0)
    a = sub_dataset(data["a"], wc, 2)
    with pytest.raises(ConfigError, match="same WorkerConfig"):
        MixBatchDataset((a, 1.0), (sub_dataset(data["b"], config(2), 3), 1.0),
                        batch_size=2, worker_config=wc)  # fmt: skip
    with pytest.raises(ConfigError, match="virtual_workers=2"):
        MixBatchDataset((a, 1.0), (sub_dataset(data["b"], wc, 3, virtual_workers=2), 1.0),
                        batch_size=2, worker_config=wc)  # fmt: skip
    with pytest.raises(ConfigError, match="finite and > 0"):
        MixBatchDataset((a, 0.0), batch_size=2, worker_config=wc)
    with pytest.raises(ConfigError, match=r"\(dataset, weight\) pair"):
        MixBatchDataset(a, batch_size=2, worker_config=wc)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="batch_size=0"):
        MixBatchDataset((a, 1.0), batch_size=0, worker_config=wc)
    with pytest.raises(ConfigError, match="virtual_epoch_length"):
        MixBatchDataset((sub_dataset(data["a"], wc, 2, virtual_epoch_length=5), 1.0),
                        batch_size=2, worker_config=wc)  # fmt: skip
    with pytest.raises(ConfigError, match="another worker_config"):
        get_loader(MixBatchDataset((a, 1.0), batch_size=2, worker_config=wc),
                   worker_config=config(2))  # fmt: skip
