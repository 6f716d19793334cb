"""End to end: a prepared image-caption dataset loaded through ``get_*_dataset`` + ``get_loader``.

Real dataloader worker processes (``num_workers=2``) and in-process loading (``num_workers=0``)
must visit the same samples, in a canonical order that depends only on the seed, the data and
the virtual workers; bad samples are skipped and reported, worker crashes surface as errors, and
no worker process outlives its loader.
"""

from __future__ import annotations

import gc
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    CaptioningSample,
    CrudeSample,
    DefaultTaskEncoder,
    ErrorPolicy,
    SkipSample,
    StokerError,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
)
from stoker.format.jsonl import prepare_jsonl
from tests.integration._images import SIZE, caption_of, make_image_dataset

#: Seconds torch's data loader waits on a worker's queue before it looks again.
STATUS_CHECK_S = float(torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL)

REPO = Path(__file__).resolve().parents[2]
#: 3 train shards of 8 samples (24: 12 per stream with 2 virtual workers), 2 val shards of 5.
SPLITS = {
    "train": {"train_a": 8, "train_b": 8, "train_c": 8},
    "val": {"val_a": 5, "val_b": 5},
}
TRAIN_ARGS: dict[str, Any] = {"shuffle_buffer_size": 5, "max_samples_per_sequence": 3}


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path_factory.mktemp("loader") / "ds"
    return root, make_image_dataset(root, SPLITS)


def config(num_workers: int, seed_offset: int = 0) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=num_workers, seed_offset=seed_offset)


def keys_of(batches: Iterator[Any]) -> list[list[str]]:
    return [list(batch.__key__) for batch in batches]


def flat(batches: list[list[str]]) -> list[str]:
    return [key for batch in batches for key in batch]


def check_batch(batch: Any) -> None:
    """A batch of ``CaptioningSample``s whose captions name their keys."""
    assert isinstance(batch, CaptioningSample)
    size = len(batch.__key__)
    assert size >= 1
    assert all(isinstance(key, str) for key in batch.__key__)
    assert batch.image.shape == (size, 3, SIZE[1], SIZE[0])
    assert batch.image.dtype == torch.float32
    assert 0.0 <= float(batch.image.min()) <= float(batch.image.max()) <= 1.0
    assert batch.caption == [caption_of(key) for key in batch.__key__]


def train_keys(root: Path, num_workers: int, **kwargs: Any) -> list[list[str]]:
    args = {"batch_size": 4, "repeat": False, **TRAIN_ARGS, **kwargs}
    seed_offset = args.pop("seed_offset", 0)
    dataset = get_train_dataset(str(root), worker_config=config(num_workers, seed_offset), **args)
    return keys_of(iter(get_loader(dataset)))


# --- every sample exactly once ------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_val_pass_visits_every_sample_once(
    images: tuple[Path, dict[str, list[str]]], num_workers: int
) -> None:
    root, keys = images
    dataset = get_val_dataset(str(root), worker_config=config(num_workers), batch_size=4)
    loader = get_loader(dataset)
    batches = list(loader)
    for batch in batches:
        check_batch(batch)
    seen = flat(keys_of(iter(batches)))
    assert sorted(seen) == sorted(keys["val"])
    assert len(seen) == len(set(seen))
    assert max(len(b.__key__) for b in batches) == 4
    assert len(loader) == len(batches)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_train_epoch_visits_every_sample_once(
    images: tuple[Path, dict[str, list[str]]], num_workers: int
) -> None:
    root, keys = images
    dataset = get_train_dataset(
        str(root),
        worker_config=config(num_workers),
        batch_size=4,
        repeat=False,
        **TRAIN_ARGS,
    )
    batches = list(get_loader(dataset))
    for batch in batches:
        check_batch(batch)
    seen = flat(keys_of(iter(batches)))
    assert sorted(seen) == sorted(keys["train"])
    assert seen != sorted(seen), "a shuffled training epoch came out in shard order"


def test_images_of_other_sizes_are_padded(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    keys = make_image_dataset(root, {"train": {"train_a": 3}})
    dataset = get_val_dataset(str(root), split_part="train", worker_config=config(0), batch_size=3)
    (batch,) = list(get_loader(dataset))
    assert batch.__key__ == keys["train"]
    assert batch.image.shape == (3, 3, SIZE[1], SIZE[0])


# --- deterministic, canonical order -------------------------------------------------------------


def test_same_configuration_gives_same_order(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = images
    first = train_keys(root, 2)
    assert train_keys(root, 2) == first
    other_seed = train_keys(root, 2, seed_offset=1)
    assert other_seed != first
    assert sorted(flat(other_seed)) == sorted(flat(first))


def test_repeat_continues_with_another_permutation(
    images: tuple[Path, dict[str, list[str]]],
) -> None:
    root, keys = images
    dataset = get_train_dataset(
        str(root), worker_config=config(2), batch_size=4, repeat=True, **TRAIN_ARGS
    )
    per_epoch = len(keys["train"]) // 4  # 24 samples: 12 per stream, 3 batches per stream
    with get_loader(dataset) as loader:
        batches = keys_of(b for _, b in zip(range(2 * per_epoch), loader, strict=False))
    first, second = flat(batches[:per_epoch]), flat(batches[per_epoch:])
    assert sorted(first) == sorted(keys["train"])
    assert sorted(second) == sorted(keys["train"])
    assert first != second
    assert train_keys(root, 2) == batches[:per_epoch]  # repeat does not change the first epoch


@pytest.mark.parametrize("split", ["train", "val"])
def test_worker_count_does_not_change_the_batches(
    images: tuple[Path, dict[str, list[str]]], split: str
) -> None:
    root, _ = images
    got = {}
    for num_workers in (0, 2):
        wc = config(num_workers)
        if split == "train":
            dataset = get_train_dataset(
                str(root), worker_config=wc, batch_size=3, repeat=False, virtual_workers=2,
                **TRAIN_ARGS,
            )  # fmt: skip
        else:
            dataset = get_val_dataset(str(root), worker_config=wc, batch_size=3, virtual_workers=2)
        got[num_workers] = [(list(b.__key__), b.image.clone()) for b in get_loader(dataset)]
    assert [k for k, _ in got[0]] == [k for k, _ in got[2]]
    for (_, image0), (_, image2) in zip(got[0], got[2], strict=True):
        assert torch.equal(image0, image2)


# --- bad samples --------------------------------------------------------------------------------


class FailOn(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Raises in ``encode_sample`` for the given keys (all keys if None)."""

    def __init__(self, keys: set[str] | None) -> None:
        super().__init__()
        self.keys = keys

    def encode_sample(self, sample: Any) -> Any:
        if self.keys is None or sample.__key__ in self.keys:
            raise ValueError(f"cannot encode {sample.__key__}")
        return sample


@pytest.mark.parametrize("how", ["corrupt jpeg", "encode_sample raises"])
def test_failing_sample_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    bad = "train_b_03"
    root = tmp_path / "ds"
    corrupt = [bad] if how == "corrupt jpeg" else []
    keys = make_image_dataset(root, {"train": SPLITS["train"]}, corrupt=corrupt)
    encoder = FailOn({bad}) if how == "encode_sample raises" else DefaultTaskEncoder()
    dataset = get_train_dataset(
        str(root),
        worker_config=config(0),
        batch_size=4,
        repeat=False,
        task_encoder=encoder,
        **TRAIN_ARGS,
    )
    with caplog.at_level(logging.WARNING, logger="stoker"):
        seen = flat(keys_of(iter(get_loader(dataset))))
    assert sorted(seen) == sorted(k for k in keys["train"] if k != bad)
    reports = [r.getMessage() for r in caplog.records if r.name.startswith("stoker")]
    assert len(reports) == 1, reports
    assert bad in reports[0]
    assert "train_b.tar" in reports[0], f"the report does not name the shard: {reports[0]}"


@pytest.mark.parametrize("how", ["corrupt jpeg", "encode_sample raises"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_raise_policy_propagates_the_error(tmp_path: Path, how: str, num_workers: int) -> None:
    bad = "val_a_02"
    root = tmp_path / "ds"
    make_image_dataset(root, {"val": SPLITS["val"]}, corrupt=[bad] if how == "corrupt jpeg" else [])
    encoder = FailOn({bad}) if how == "encode_sample raises" else DefaultTaskEncoder()
    dataset = get_val_dataset(
        str(root),
        worker_config=config(num_workers),
        batch_size=2,
        task_encoder=encoder,
        error_policy=ErrorPolicy(mode="raise"),
    )
    with pytest.raises(StokerError, match=bad):
        list(get_loader(dataset))


def test_too_many_consecutive_failures_raise(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = images
    dataset = get_val_dataset(
        str(root),
        worker_config=config(0),
        batch_size=2,
        task_encoder=FailOn(None),
        error_policy=ErrorPolicy(mode="skip", max_consecutive_failures=3),
    )
    with pytest.raises(StokerError, match="3 samples failed in a row"):
        list(get_loader(dataset))


class FailingBatch(DefaultTaskEncoder[Any, Any, Any, Any]):
    def batch(self, samples: list[Any]) -> Any:
        raise ValueError("broken batch")


def test_a_batch_hook_failing_every_time_reaches_the_limit(
    images: tuple[Path, dict[str, list[str]]],
) -> None:
    """Samples that encode well between failed batches do not reset the count of batches."""
    root, _ = images
    dataset = get_train_dataset(
        str(root),
        worker_config=config(0),
        batch_size=2,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=FailingBatch(),
        error_policy=ErrorPolicy(mode="skip", max_consecutive_failures=5),
    )
    with pytest.raises(StokerError, match=r"5 batches failed in a row.*ValueError: broken batch"):
        list(get_loader(dataset))


# --- task encoder outputs -----------------------------------------------------------------------


class Twice(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: CaptioningSample) -> Iterator[CaptioningSample]:
        yield sample
        yield CaptioningSample.derive_from(sample, image=sample.image, caption="again")


class SkipOdd(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: CaptioningSample) -> CaptioningSample:
        if int(sample.__key__[-2:]) % 2:
            raise SkipSample()
        return sample


@pytest.mark.parametrize("num_workers", [0, 2])
def test_generator_encode_sample_gives_two_samples_each(
    images: tuple[Path, dict[str, list[str]]], num_workers: int
) -> None:
    root, keys = images
    dataset = get_val_dataset(
        str(root), worker_config=config(num_workers), batch_size=4, task_encoder=Twice()
    )
    pairs = [
        (key, caption)
        for batch in get_loader(dataset)
        for key, caption in zip(batch.__key__, batch.caption, strict=True)
    ]
    assert len(pairs) == 2 * len(keys["val"])
    assert sorted(pairs) == sorted(
        [(k, caption_of(k)) for k in keys["val"]] + [(k, "again") for k in keys["val"]]
    )


@pytest.mark.parametrize("num_workers", [0, 2])
def test_skip_sample_drops_samples(
    images: tuple[Path, dict[str, list[str]]], num_workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    root, keys = images
    dataset = get_train_dataset(
        str(root),
        worker_config=config(num_workers),
        batch_size=4,
        repeat=False,
        task_encoder=SkipOdd(),
        **TRAIN_ARGS,
    )
    with caplog.at_level(logging.WARNING, logger="stoker"):
        seen = flat(keys_of(iter(get_loader(dataset))))
    assert sorted(seen) == sorted(k for k in keys["train"] if int(k[-2:]) % 2 == 0)
    assert not [r for r in caplog.records if r.name.startswith("stoker")]  # not failures


# --- workers: crashes and clean-up --------------------------------------------------------------

CRASH_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_val_dataset

    class Crash(DefaultTaskEncoder):
        def encode_sample(self, sample):
            if sample.__key__ == "val_b_01":
                os._exit(1)
            return sample

    dataset = get_val_dataset(
        sys.argv[1],
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2,
        task_encoder=Crash(),
    )
    try:
        for batch in get_loader(dataset):
            pass
    except Exception as e:
        print("RAISED", type(e).__name__, e, flush=True)
        sys.exit(3)
    print("NO ERROR", flush=True)
    """
)


def test_worker_crash_raises_in_main_process(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = images
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "RAISED" in done.stdout
    assert "exited unexpectedly" in done.stdout
    assert time.monotonic() - start < 60


ALIVE_AT_EXIT_SCRIPT = textwrap.dedent(
    """
    import sys
    from stoker import WorkerConfig, get_loader, get_train_dataset

    dataset = get_train_dataset(
        sys.argv[1], worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2, shuffle_buffer_size=5, max_samples_per_sequence=3,
    )
    loader = get_loader(dataset)
    batches = iter(loader)
    next(batches)
    cycle = [batches, loader]
    cycle.append(cycle)  # still alive, in a cycle, when the interpreter exits
    print("EXITING", flush=True)
    """
)


def test_a_loader_alive_at_exit_exits_cleanly(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = images
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", ALIVE_AT_EXIT_SCRIPT, str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0 and "EXITING" in done.stdout, done.stdout + done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def children_of_this_process() -> set[int]:
    """Pids of the live child processes of this process (from /proc)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except FileNotFoundError:  # the thread ended while we looked
            continue
        pids.update(int(pid) for pid in text)
    return pids


def wait_for_no_new_children(before: set[int], seconds: float = 5.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while True:
        multiprocessing.active_children()  # reaps finished children
        left = children_of_this_process() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_early_break_and_del_leave_no_children(
    images: tuple[Path, dict[str, list[str]]],
) -> None:
    root, _ = images
    before = children_of_this_process()
    dataset = get_train_dataset(str(root), worker_config=config(2), batch_size=2, **TRAIN_ARGS)
    loader = get_loader(dataset)
    for i, batch in enumerate(loader):
        check_batch(batch)
        if i == 1:
            break
    assert children_of_this_process() - before, "no worker processes were started"
    del loader, batch
    assert not wait_for_no_new_children(before)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_leaving_the_with_block_stops_workers(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, _ = images
    before = children_of_this_process()
    dataset = get_train_dataset(str(root), worker_config=config(2), batch_size=2, **TRAIN_ARGS)
    with get_loader(dataset) as loader:
        batches = [batch for _, batch in zip(range(2), loader, strict=False)]
    assert len(batches) == 2
    assert not wait_for_no_new_children(before)


class FatalOn(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Raises an error that stops the run (not a per-sample failure) for one key."""

    def encode_sample(self, sample: Any) -> Any:
        if sample.__key__ == "val_a_02":
            raise NotImplementedError("this hook is not written yet")
        return sample


def test_loader_dropped_after_a_worker_error_stops_its_workers_quickly(
    images: tuple[Path, dict[str, list[str]]],
) -> None:
    # The usual way a loader dies: an error leaves the loop and the traceback keeps the loader
    # in a reference cycle until the garbage collector runs.
    root, _ = images
    dataset = get_val_dataset(
        str(root), worker_config=config(2), batch_size=2, task_encoder=FatalOn()
    )
    gc.collect()  # what earlier tests left behind is not this loader's to collect
    before = children_of_this_process()
    loader = get_loader(dataset)
    with pytest.raises(NotImplementedError) as raised:
        list(loader)
    del loader, raised
    start = time.monotonic()
    gc.collect()
    # not torch's 5 s status-check timeout per worker, which stopping used to wait out
    assert time.monotonic() - start < STATUS_CHECK_S * 2, "collecting the loader blocked"
    assert not wait_for_no_new_children(before)


def test_loader_dropped_mid_epoch_in_a_cycle_stops_its_workers_quickly(
    images: tuple[Path, dict[str, list[str]]],
) -> None:
    # In a cycle, the garbage collector may finalize torch's queues before the loader: stopping
    # the workers must not wait on them (it used to take torch's 5 s timeout per worker).
    root, _ = images
    dataset = get_train_dataset(str(root), worker_config=config(1), batch_size=2, **TRAIN_ARGS)
    gc.collect()
    before = children_of_this_process()
    loader = get_loader(dataset)
    batches = iter(loader)
    for _ in range(3):
        next(batches)
    cycle: list[Any] = [batches, loader]
    cycle.append(cycle)
    del batches, loader, cycle
    start = time.monotonic()
    gc.collect()
    # not torch's 5 s status-check timeout per worker, which stopping used to wait out
    assert time.monotonic() - start < STATUS_CHECK_S, "collecting the loader waited on its workers"
    assert not wait_for_no_new_children(before)


# --- lengths, limits, virtual epochs ------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_of_val_loader_is_its_batch_count(
    images: tuple[Path, dict[str, list[str]]], num_workers: int
) -> None:
    root, _ = images
    for batch_size in (1, 3, 4, 10):
        dataset = get_val_dataset(
            str(root), worker_config=config(num_workers), batch_size=batch_size
        )
        loader = get_loader(dataset)
        assert len(loader) == len(list(loader)), batch_size


def test_limit_gives_that_many_batches(images: tuple[Path, dict[str, list[str]]]) -> None:
    root, keys = images
    dataset = get_val_dataset(str(root), worker_config=config(2), batch_size=2, limit=2)
    loader = get_loader(dataset)
    batches = keys_of(iter(loader))
    assert len(batches) == 2
    assert len(loader) == 2
    assert set(flat(batches)) <= set(keys["val"])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_virtual_epoch_length_splits_the_loop(
    images: tuple[Path, dict[str, list[str]]], num_workers: int
) -> None:
    root, keys = images
    dataset = get_train_dataset(
        str(root),
        worker_config=config(num_workers),
        batch_size=2,
        virtual_epoch_length=3,
        **TRAIN_ARGS,
    )
    loader = get_loader(dataset)
    assert len(loader) == 3
    first, second = keys_of(iter(loader)), keys_of(iter(loader))
    assert len(first) == len(second) == 3
    both = flat(first) + flat(second)
    assert len(both) == 12
    assert len(set(both)) == 12, "the second pass repeated samples of the first"
    assert set(both) <= set(keys["train"])
    loader.close()


# --- JSONL --------------------------------------------------------------------------------------


@pytest.fixture
def jsonl_file(tmp_path: Path) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": f"line {i}", "i": i}) + "\n" for i in range(7)))
    assert prepare_jsonl(str(path)) == (7, path.stat().st_size)
    return path


@pytest.mark.parametrize("num_workers", [0, 2])
def test_jsonl_loads_crude_samples(jsonl_file: Path, num_workers: int) -> None:
    dataset = get_train_dataset(
        str(jsonl_file),
        worker_config=config(num_workers),
        batch_size=None,
        shuffle_buffer_size=3,
        max_samples_per_sequence=2,
        repeat=False,
    )
    samples = list(get_loader(dataset))
    assert all(isinstance(s, CrudeSample) for s in samples)
    assert sorted(s["json"]["i"] for s in samples) == list(range(7))
    assert all(s["json"]["text"] == f"line {s['json']['i']}" for s in samples)
    assert len({s["__key__"] for s in samples}) == 7


def test_jsonl_batches_as_dicts_of_lists(jsonl_file: Path) -> None:
    dataset = get_val_dataset(
        str(jsonl_file), split_part="train", worker_config=config(0), batch_size=3
    )
    batches = list(get_loader(dataset))
    assert [len(b["__key__"]) for b in batches] == [3, 3, 1]
    assert [i for b in batches for i in b["json"]["i"]] == list(range(7))


def test_energon_deprecated_decoder_arguments_still_apply(tmp_path: Path) -> None:
    from stoker import DefaultTaskEncoder

    make_image_dataset(tmp_path, {"val": {"val_a": 3}})
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    with pytest.warns(DeprecationWarning, match="image_decode"):
        ds = get_val_dataset(
            str(tmp_path),
            worker_config=config,
            batch_size=2,
            task_encoder=DefaultTaskEncoder(),
            image_decode="torchrgb8",
        )
    batch = next(iter(get_loader(ds)))
    assert batch.image.dtype == torch.uint8
