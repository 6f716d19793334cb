"""The error model end to end, with real dataloader workers (``num_workers=2``) and in-process
loading (``num_workers=0``).

A user hook's failure reaches the training process with the hook's own frame in its traceback
and the sample's key and shard; a stoker error raised in a worker keeps its type and message;
under ``ErrorPolicy(mode="skip")`` a failing ``encode_batch``, a truncated shard and a read that
exhausted its retries are skipped, counted by reason, and visible from the main process through
``loader.skipped()``.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import fsspec  # type: ignore[import-untyped]
import pytest
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from stoker import (
    DefaultTaskEncoder,
    ErrorPolicy,
    LoaderOptions,
    MapDataset,
    WorkerConfig,
    get_loader,
    get_val_dataset,
    prepare_dataset,
    reraise_exception,
)
from stoker.errors import ConfigError, SampleError, StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.tar_index import load_offsets
from stoker.pipeline.skips import CORRUPT_SHARD, REST_OF_SHARD, STORAGE
from tests.conftest import make_dataset, make_val_texts

SHARDS, PER_SHARD = 3, 6
KEYS = [f"s{s}_{i:05d}" for s in range(SHARDS) for i in range(PER_SHARD)]
TEXT = make_dataset_yaml("TextSample", {"text": "txt"})


def prepared(root: Path, dataset_yaml: dict[str, Any] = TEXT) -> Path:
    return make_val_texts(root, SHARDS, PER_SHARD, dataset_yaml)


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


def full_text(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


# --- failures that stop the run ---------------------------------------------------------------


def caption_of(sample: Any) -> str:
    """A user's helper that fails on one sample (the frame the traceback must show)."""
    captions = {key: f"caption of {key}" for key in KEYS if key != "s1_00002"}
    return captions[sample.__key__]


class Captions(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: Any) -> Any:
        sample.text = caption_of(sample)
        return sample


@pytest.mark.parametrize("workers", [0, 2])
def test_a_hook_failure_shows_the_hooks_frame_and_the_sample(tmp_path: Path, workers: int) -> None:
    root = prepared(tmp_path / "ds")
    dataset = get_val_dataset(
        str(root), worker_config=config(workers), batch_size=2, task_encoder=Captions(),
        error_policy=ErrorPolicy(mode="raise"),
    )  # fmt: skip
    with pytest.raises(SampleError) as info, get_loader(dataset) as loader:
        list(loader)
    error = info.value
    assert error.key == "s1_00002" and "shard_001.tar" in str(error)
    assert "encode_sample failed with KeyError" in str(error)
    text = full_text(error)
    assert "in caption_of" in text and "captions[sample.__key__]" in text
    assert error.__cause__ is not error


@pytest.mark.parametrize("workers", [0, 2])
def test_energons_reraise_handler_gives_the_users_own_exception(
    tmp_path: Path, workers: int
) -> None:
    root = prepared(tmp_path / "ds")
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers,
                      global_error_handler=reraise_exception)  # fmt: skip
    dataset = get_val_dataset(str(root), worker_config=wc, batch_size=2, task_encoder=Captions())
    with pytest.raises(KeyError) as info, get_loader(dataset) as loader:
        list(loader)
    assert "in caption_of" in full_text(info.value)
    assert any("s1_00002" in note for note in getattr(info.value, "__notes__", []))


LOADER_PY = """
def sample_loader(raw):
    return {"__key__": raw["__key__"], "text": raw["txt"].decode()}
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stoker_error_opening_a_workers_streams_keeps_its_type_and_message(
    tmp_path: Path, workers: int
) -> None:
    text = {"sample_type": TEXT["sample_type"], "part_filter": ["txt"],
            "sample_loader": "sample_loader.py:sample_loader"}  # fmt: skip
    root = tmp_path / "ds"
    make_dataset(root, shards=SHARDS, per_shard=PER_SHARD)
    (root / ".nv-meta").mkdir()
    (root / ".nv-meta" / "sample_loader.py").write_text(LOADER_PY)
    prepare_dataset(str(root), split_parts=[("val", "shard_*")], dataset_yaml=text)
    dataset = get_val_dataset(
        str(root), worker_config=config(workers), batch_size=2, trust_sample_loader=True
    )
    # The data folder changes after the dataset was made: each worker loads the code again.
    (root / ".nv-meta" / "sample_loader.py").write_text("def renamed(raw):\n    return raw\n")
    with pytest.raises(ConfigError, match="defines no function 'sample_loader'") as info:
        list(get_loader(dataset))
    assert "_load_function" in full_text(info.value)  # the worker's frames, as text


# --- failures the skip policy skips, counted ------------------------------------------------


class BadBatch(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_batch(self, batch: Any) -> Any:
        if "s2_00002" in batch.__key__:
            raise ValueError("no room for this batch")
        return batch


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_encode_batch_is_skipped_and_counted(tmp_path: Path, workers: int) -> None:
    root = prepared(tmp_path / "ds")
    dataset = get_val_dataset(
        str(root), worker_config=config(workers), batch_size=2, task_encoder=BadBatch()
    )
    with get_loader(dataset) as loader:
        keys = [k for batch in loader for k in batch.__key__]
        skipped = loader.skipped()
    lost = [k for k in KEYS if k not in keys]
    assert "s2_00002" in lost and len(lost) == 2 and len(keys) == len(set(keys))  # one batch
    assert skipped.by_reason == {"encode_batch: ValueError": 1}
    assert skipped.by_source == {str(root): {"encode_batch: ValueError": 1}}
    example = skipped.examples["encode_batch: ValueError"][0]  # "first .. last (n samples)"
    assert all(k in example for k in lost)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_truncated_shard_skips_the_rest_of_the_shard(tmp_path: Path, workers: int) -> None:
    root = prepared(tmp_path / "ds")
    shard = root / "shard_001.tar"
    offsets = load_offsets((root / "shard_001.tar.idx").read_bytes(), "idx").tolist()
    shard.write_bytes(shard.read_bytes()[: offsets[2] + 100])  # cut inside sample 2
    dataset = get_val_dataset(str(root), worker_config=config(workers), batch_size=2)
    with get_loader(dataset) as loader:
        keys = sorted(k for batch in loader for k in batch.__key__)
        skipped = loader.skipped()
    lost = [k for k in KEYS if k not in keys]
    assert lost and all(k.startswith("s1_") for k in lost)
    assert "s1_00002" in lost and "s1_00005" in lost
    counts = skipped.by_reason
    assert set(counts) <= {CORRUPT_SHARD, REST_OF_SHARD} and counts.get(CORRUPT_SHARD, 0) >= 1
    assert skipped.total == len(lost)  # every sample not loaded is counted, none twice
    assert skipped.by_source == {str(root): counts}


class FlakyFileSystem(LocalFileSystem):  # type: ignore[misc]
    """Local files behind ``flaky://``, whose data reads of ``shard_001.tar`` always fail with
    a transient error (as a store whose connection keeps dropping)."""

    protocol = ("flaky",)

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return super()._strip_protocol(path.removeprefix("flaky://"))

    def cat_file(self, path: str, start: int | None = None, end: int | None = None) -> bytes:
        if str(path).endswith("shard_001.tar"):
            raise ConnectionResetError("connection reset by peer (test)")
        return super().cat_file(path, start=start, end=end)  # type: ignore[no-any-return]


fsspec.register_implementation("flaky", FlakyFileSystem, clobber=True)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_read_that_exhausted_its_retries_is_skipped_and_counted(
    tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = prepared(tmp_path / "ds")
    (tmp_path / "storage.yaml").write_text(
        "retry:\n  max_attempts: 2\n  base_delay: 0.001\n  max_delay: 0.001\n"
    )
    monkeypatch.setenv("STOKER_STORAGE_CONFIG", str(tmp_path / "storage.yaml"))
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    url = f"flaky://{root}"
    dataset = get_val_dataset(url, worker_config=config(workers), batch_size=2)
    with pytest.raises(StorageError, match="ended short"), get_loader(dataset) as loader:
        keys = sorted(k for batch in loader for k in batch.__key__)  # the default allows 1 %
    options = LoaderOptions(max_storage_skip_share=1.0)  # a whole shard may go
    with get_loader(dataset, options=options) as loader:
        keys = sorted(k for batch in loader for k in batch.__key__)
        skipped = loader.skipped()
    assert keys == [k for k in KEYS if not k.startswith("s1_")]
    assert skipped.by_reason == {STORAGE: PER_SHARD}
    assert list(skipped.by_source.values()) == [{STORAGE: PER_SHARD}]
    assert len(skipped.examples[STORAGE]) == 3


def refuse_one(batch: Any) -> Any:
    if "s0_00001" in batch.__key__:
        raise ValueError("refused")
    return batch


@pytest.mark.parametrize("workers", [0, 2])
def test_a_wrappers_skips_are_counted_too(tmp_path: Path, workers: int) -> None:
    root = prepared(tmp_path / "ds")
    wc = config(workers)
    dataset = MapDataset(get_val_dataset(str(root), worker_config=wc, batch_size=2), refuse_one,
                         worker_config=wc)  # fmt: skip
    with get_loader(dataset) as loader:
        keys = [k for batch in loader for k in batch.__key__]
        skipped = loader.skipped()
    lost = [k for k in KEYS if k not in keys]
    assert "s0_00001" in lost and len(lost) <= 2  # the one batch holding it
    assert skipped.by_reason == {"MapDataset(refuse_one): ValueError": 1}
    assert skipped.by_source == {str(root): {"MapDataset(refuse_one): ValueError": 1}}
