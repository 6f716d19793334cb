"""``Loader.stats()`` with real workers (``num_workers=2``) and in process (``num_workers=0``):
counts equal what was yielded, skips equal the injected failures, the data wait tells a slow
consumer from a slow ``encode_sample`` (named as the bottleneck), blend shares meet their
weights, and the batch envelope carries all of it."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

from stoker import (
    DefaultTaskEncoder,
    ErrorPolicy,
    WorkerConfig,
    get_loader,
    get_train_dataset,
    get_val_dataset,
)
from stoker.preview.bench_measure import read_stats
from stoker.storage.options import LoaderOptions
from tests.conftest import make_val_texts
from tests.integration._blends import Source, jsonl_blend

SHARDS, PER_SHARD = 3, 8


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stats") / "ds"
    return make_val_texts(root, SHARDS, PER_SHARD)


def config(workers: int) -> WorkerConfig:
    return WorkerConfig(rank=0, world_size=1, num_workers=workers)


class FailSome(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Fails ``encode_sample`` on samples ending in 1 and skips those ending in 2 on purpose."""

    def encode_sample(self, sample: Any) -> Any:
        if sample.__key__.endswith("1"):
            raise ValueError("bad sample (test)")
        if sample.__key__.endswith("2"):
            from stoker import SkipSample

            raise SkipSample()
        return sample


@pytest.mark.parametrize("workers", [0, 2])
def test_counts_and_skips_equal_what_was_yielded_and_injected(texts: Path, workers: int) -> None:
    dataset = get_val_dataset(
        str(texts),
        worker_config=config(workers),
        batch_size=3,
        task_encoder=FailSome(),
        error_policy=ErrorPolicy(mode="skip"),
    )
    with get_loader(dataset) as loader:
        batches = list(loader)
        stats = loader.stats()
    samples = sum(len(b.__key__) for b in batches)
    assert stats.batches == len(batches) and stats.samples == samples
    failing = [k for s in range(SHARDS) for k in (f"s{s}_00001",)]
    skipping = [f"s{s}_00002" for s in range(SHARDS)]
    assert stats.skipped == {
        "loading: ValueError": len(failing),
        "encode_sample: SkipSample": len(skipping),
    }
    assert stats.skipped_by_dataset == {str(texts): stats.skipped}
    assert samples == SHARDS * PER_SHARD - len(failing) - len(skipping)
    assert set(stats.workers) == set(range(max(workers, 1)))
    assert all(0 < w.utilisation <= 1.0 and w.rss > 0 for w in stats.workers.values())
    assert stats.stage_seconds["read"] > 0 and stats.stage_seconds["decode"] > 0
    if workers:
        assert stats.stage_seconds["transport"] > 0 and stats.shm_slots >= 0
    view = read_stats(loader)  # what `stoker bench` shows
    assert view is not None and view.skipped == 2 * SHARDS and view.bottleneck is not None


@pytest.mark.parametrize("workers", [0, 2])
def test_a_slow_consumer_waits_for_nothing(texts: Path, workers: int) -> None:
    """A training step of 0.25 s, against batches of two short texts: the data is ready when
    asked for. The step the loader reports is bounded by what this loop measures itself (no
    fixed window), and the wait is under a tenth of it: 25 ms of slack for a loaded machine."""
    step = 0.25
    dataset = get_val_dataset(str(texts), worker_config=config(workers), batch_size=2)
    with get_loader(dataset) as loader:
        it = iter(loader)
        marks: list[tuple[float, float]] = []  # (before next(), after it)

        def take() -> None:
            time.sleep(step)  # the training step
            before = time.perf_counter()
            next(it)
            marks.append((before, time.perf_counter()))

        for _ in range(workers + 1):  # every worker has started: start-up is no steady state
            take()
        loader.stats(reset=True)
        del marks[:-1]  # the first step counted runs from the last of these
        for _ in range(6):
            take()
        stats = loader.stats()
    assert stats.batches == 6 and stats.samples == 12
    assert stats.data_wait_frac < 0.1, stats
    assert stats.bound == "consumer"
    # The loader's step k runs from inside next() k-1 to inside next() k.
    pairs = list(itertools.pairwise(marks))
    inner = sum(b[0] - a[1] for a, b in pairs) / len(pairs)
    outer = sum(b[1] - a[0] for a, b in pairs) / len(pairs)
    assert step <= inner <= stats.step_s <= outer, (inner, stats.step_s, outer)


class SlowEncode(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: Any) -> Any:
        time.sleep(0.01)
        return sample


@pytest.mark.parametrize("workers", [0, 2])
def test_a_slow_encode_sample_is_the_bottleneck(texts: Path, workers: int) -> None:
    dataset = get_val_dataset(
        str(texts), worker_config=config(workers), batch_size=2, task_encoder=SlowEncode()
    )
    with get_loader(dataset) as loader:
        for _ in loader:
            pass  # a training step that costs nothing
        stats = loader.stats()
    assert stats.data_wait_frac > 0.9, stats
    assert stats.bound == "data"
    assert stats.bottleneck == "encode_sample"
    assert stats.stage_seconds["encode_sample"] >= 0.8 * SHARDS * PER_SHARD * 0.01
    view = read_stats(loader)
    assert view is not None and view.bottleneck == "encode_sample"
    assert view.wait_frac is not None and view.wait_frac > 0.9


def test_stats_off_measures_counts_only(texts: Path) -> None:
    dataset = get_val_dataset(str(texts), worker_config=config(2), batch_size=2)
    with get_loader(dataset, options=LoaderOptions(stats=False)) as loader:
        n = len(list(loader))
        stats = loader.stats()
    assert stats.batches == n and stats.samples == SHARDS * PER_SHARD
    assert stats.stage_seconds == {} and stats.bottleneck is None


def test_reset_starts_a_new_window_and_flat_names(texts: Path) -> None:
    dataset = get_val_dataset(str(texts), worker_config=config(0), batch_size=2)
    with get_loader(dataset) as loader:
        it = iter(loader)
        for _ in range(3):
            next(it)
        first = loader.stats(reset=True)
        next(it)
        second = loader.stats()
    assert (first.batches, second.batches, second.samples) == (3, 1, 2)
    flat = second.flat()
    assert flat["data/batches"] == 1.0 and "data/wait_frac" in flat
    assert json.dumps(dataclasses.asdict(second))  # plain data


@pytest.mark.parametrize("workers", [0, 2])
def test_realised_blend_shares_meet_the_weights(tmp_path: Path, workers: int) -> None:
    path = jsonl_blend(tmp_path, {"a": 50, "b": 50}, "blend.yaml", "    blend:\n"
                       "      - {path: a.jsonl, weight: 5}\n"
                       "      - {path: b.jsonl, weight: 2}\n")  # fmt: skip
    dataset = get_train_dataset(
        str(path), worker_config=config(workers), batch_size=10, shuffle_buffer_size=None,
        max_samples_per_sequence=None, task_encoder=Source(),
    )  # fmt: skip
    with get_loader(dataset) as loader:
        it = iter(loader)
        seen = [src for _ in range(70) for src in next(it)]
        stats = loader.stats()
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    assert stats.datasets[a].samples == seen.count("a") and stats.samples == len(seen)
    assert stats.datasets[a].target == pytest.approx(5 / 7)
    assert stats.datasets[b].target == pytest.approx(2 / 7)
    assert stats.datasets[a].share == pytest.approx(5 / 7, abs=0.05)
    assert stats.datasets[b].share == pytest.approx(seen.count("b") / len(seen))


@pytest.mark.parametrize("workers", [0, 2])
def test_mix_batch_shares_and_samples(tmp_path: Path, workers: int) -> None:
    from tests.integration.test_mix_batch import SUB_BATCH, make_mix, write_ids

    data = {
        "a": write_ids(tmp_path / "a.jsonl", 0, 40),
        "b": write_ids(tmp_path / "b.jsonl", 1000, 30),
    }
    with get_loader(make_mix(data, workers=workers, weights=(3.0, 1.0), batch_size=4)) as loader:
        it = iter(loader)
        subs = [sub["ids"] for _ in range(25) for sub in next(it)]
        stats = loader.stats()
    ids = [i for sub in subs for i in sub]
    assert stats.batches == 25 and stats.samples == len(ids)
    a, b = str(data["a"]), str(data["b"])
    want_a = 3 * SUB_BATCH["a"] / (3 * SUB_BATCH["a"] + SUB_BATCH["b"])  # weights per sub-batch
    assert stats.datasets[a].target == pytest.approx(want_a)
    assert stats.datasets[a].share == pytest.approx(want_a, abs=0.06)
    assert stats.datasets[b].samples == sum(1 for i in ids if i >= 1000)
