"""The restore fingerprint covers the whole recipe; a metadataset's ``null`` is not "not given"."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.jsonl import prepare_jsonl
from stoker.format.prepare import prepare_dataset
from stoker.runtime.fingerprint import RECIPE
from tests.conftest import write_shard
from tests.contract.contract import roundtrip, take
from tests.integration.test_packing import write_texts

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
_NEW_FIELDS = ("repeat", "batch_drop_last", "limit", "virtual_epoch_length", "packing_buffer_size",
               "group_batches")  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fingerprint")
    write_texts(base / "a.jsonl", 30)
    write_texts(base / "b.jsonl", 30, seed=1)
    return base


def loader(path: Path | str, workers: int = 0, **options: Any) -> Any:
    defaults: dict[str, Any] = {"batch_size": 2, "shuffle_buffer_size": 4,
                                "max_samples_per_sequence": 3, "virtual_workers": 2}  # fmt: skip
    dataset = get_train_dataset(
        str(path),
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        **{**defaults, **options},
    )
    return get_loader(dataset)


def blend(root: Path, name: str, a_options: str = "", b_options: str = "") -> Path:
    path = root / name
    path.write_text(V2 + "    blend:\n"
                    f"      - {{path: a.jsonl, weight: 1{a_options}}}\n"
                    f"      - {{path: b.jsonl, weight: 2{b_options}}}\n")  # fmt: skip
    return path


def saved(path: Path, workers: int = 0, **options: Any) -> dict[str, Any]:
    with loader(path, workers, **options) as first:
        take(first, 3)
        return roundtrip(first.save_state_rank())


def refused(state: dict[str, Any], path: Path, **options: Any) -> str:
    with loader(path, **options) as other, pytest.raises(ConfigError) as caught:
        other.restore_state_rank(state)
    return str(caught.value)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ((", shuffle_over_epochs_multiplier: 2", ""), (", shuffle_over_epochs_multiplier: 3", ""),
         "sources[0].shuffle_over_epochs_multiplier: saved 2, current 3"),
        (("", ", subset: {range: ['0%', '50%']}"), ("", ", subset: {range: ['0%', '60%']}"),
         "sources[1].subset: saved [0, 15], current [0, 18]"),
    ],
)  # fmt: skip
def test_a_changed_source_option_is_refused_and_listed(
    root: Path, before: tuple[str, str], after: tuple[str, str], expected: str
) -> None:
    state = saved(blend(root, "before.yaml", *before))
    message = refused(state, blend(root, "after.yaml", *after))
    assert expected in message
    assert "recipe" not in message  # the listed field says it all


@pytest.mark.parametrize(
    ("option", "expected"),
    [({"repeat": False}, "repeat: saved True, current False"),
     ({"batch_drop_last": True}, "batch_drop_last: saved False, current True")],
)  # fmt: skip
def test_a_changed_loader_option_is_refused_and_listed(
    root: Path, option: dict[str, Any], expected: str
) -> None:
    state = saved(root / "a.jsonl")
    assert expected in refused(state, root / "a.jsonl", **option)


def test_a_difference_only_the_hash_sees_is_refused(tmp_path: Path) -> None:
    """Same path, split, sample and shard counts: only the per-shard counts differ."""

    def make(sizes: tuple[int, int]) -> Path:
        shutil.rmtree(tmp_path / "ds", ignore_errors=True)
        for s, n in enumerate(sizes):
            samples = [(f"s{s}_{i:03d}", {"txt": f"{s}/{i}".encode()}) for i in range(n)]
            write_shard(tmp_path / "ds" / f"data-{s}.tar", samples)
        prepare_dataset(str(tmp_path / "ds"), split_ratio=[("train", 1.0)],
                        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}))  # fmt: skip
        return tmp_path / "ds"

    state = saved(make((8, 12)))
    message = refused(state, make((12, 8)))
    assert f"{RECIPE}: saved 'sha256:" in message and "per-shard sample counts" in message


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_with_the_older_fingerprint_restores_with_a_note(
    root: Path, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    path = blend(root, "older.yaml")
    with loader(path, workers) as first:
        take(first, 3)
        state = roundtrip(first.save_state_rank())
        expected = take(first, 5)
    older = roundtrip(state)
    older["stoker_state_version"] = 1
    fields = older["fingerprint"]
    for key in [*_NEW_FIELDS, RECIPE, *(k for k in fields if k.startswith("sources["))]:
        fields.pop(key)
    with caplog.at_level(logging.INFO, logger="stoker"), loader(path, workers) as resumed:
        resumed.restore_state_rank(older)
        assert take(resumed, 5) == expected
    assert "saved before stoker fingerprinted the whole recipe" in caplog.text
    fields["shuffle_buffer_size"] = 99  # what an older fingerprint has is still checked
    assert "shuffle_buffer_size: saved 99, current 4" in refused(older, path)


def test_elastic_restore_keeps_working(root: Path) -> None:
    """Another worker count: the topology is not part of the fingerprint."""
    path = blend(root, "elastic.yaml")
    with loader(path, 2) as first:
        take(first, 4)
        state = roundtrip(first.save_state_rank())
        expected = take(first, 4)
    with loader(path, 1) as resumed:
        resumed.restore_state_rank(state)
        assert take(resumed, 4) == expected


def test_null_multiplier_is_not_a_missing_one(root: Path) -> None:
    """Energon: ``null`` turns slice shuffling off for that dataset whatever the loader says;
    a dataset that does not set it follows the loader's value."""
    path = blend(root, "null.yaml", ", shuffle_over_epochs_multiplier: null")
    wc = WorkerConfig(rank=0, world_size=1, num_workers=0)
    dataset = get_train_dataset(str(path), worker_config=wc, batch_size=1,
                                shuffle_buffer_size=None, max_samples_per_sequence=None,
                                shuffle_over_epochs_multiplier=3)  # fmt: skip
    assert [s.shuffle_over_epochs_multiplier for s in dataset.sources] == [0, 1]
    assert [dataset.plan(0, d)._slices_in_order for d in (0, 1)] == [True, False]
    assert dataset.plan(0, 1)._multiplier == 3
    fingerprint = dataset.fingerprint()
    assert fingerprint["sources[0].shuffle_over_epochs_multiplier"] == 0
    assert fingerprint["sources[1].shuffle_over_epochs_multiplier"] == 1
    state = saved(path)
    message = refused(state, blend(root, "not_null.yaml"))
    assert "sources[0].shuffle_over_epochs_multiplier: saved 0, current 1" in message


class SourceAndId(DefaultTaskEncoder):  # type: ignore[type-arg]
    @stateless
    def encode_sample(self, sample: Any) -> tuple[str, int]:
        return sample["json"]["src"], sample["json"]["i"]

    def batch(self, samples: list[Any]) -> list[Any]:
        return samples


def test_null_multiplier_reads_in_order_in_the_workers(tmp_path: Path) -> None:
    """With 2 workers: the dataset set to ``null`` reads its slices in order in each stream, the
    one not set shuffles them over the loader's 3 epochs."""
    for name in ("a", "b"):
        lines = [json.dumps({"src": name, "i": i}) + "\n" for i in range(30)]
        (tmp_path / f"{name}.jsonl").write_text("".join(lines))
        prepare_jsonl(str(tmp_path / f"{name}.jsonl"))
    path = blend(tmp_path, "null_workers.yaml", ", shuffle_over_epochs_multiplier: null")
    dataset = get_train_dataset(
        str(path), worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=1, shuffle_buffer_size=None, max_samples_per_sequence=3,
        parallel_shard_iters=1, virtual_workers=2, shuffle_over_epochs_multiplier=3,
        task_encoder=SourceAndId(),
    )  # fmt: skip
    per_stream: dict[tuple[str, int], list[int]] = {}
    with get_loader(dataset) as loaded:
        for t, batch in zip(range(36), loaded, strict=False):
            src, i = batch[0]
            per_stream.setdefault((src, t % 2), []).append(i)  # batch t: stream t mod 2
    for stream in (0, 1):
        assert per_stream[("a", stream)] == sorted(per_stream[("a", stream)])
    assert any(per_stream[("b", s)] != sorted(per_stream[("b", s)]) for s in (0, 1))
