"""A loader's options reach its worker processes with the recipe; workers read no environment."""

from __future__ import annotations

import os
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, LoaderOptions, get_loader, get_savable_loader
from stoker.errors import ConfigError
from stoker.pipeline.read_ahead import read_ahead
from stoker.storage.options import current
from tests.integration._remote import prepare_local, train_dataset


class OptionsProbe(DefaultTaskEncoder[Any, Any, Any, Any]):
    """Batches that carry the options of the process that made them."""

    def batch(self, samples: list[Any]) -> dict[str, Any]:
        options = current()
        return {
            "keys": [s.__key__ for s in samples],
            "pid": os.getpid(),
            "options": options,
            "read_ahead": (read_ahead().budget, read_ahead().threads),
        }


@pytest.fixture(scope="module")
def dataset_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(prepare_local(tmp_path_factory.mktemp("opts"), "ds", shards=3, per_shard=12))


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loaders_options_are_the_workers_options(
    dataset_path: str, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = LoaderOptions(prefetch_bytes=1 << 20, prefetch_threads=3, batch_slots_mb=0,
                            cache_dir=None, retry_seconds=7.0)  # fmt: skip
    dataset = train_dataset(dataset_path, workers)
    dataset.task_encoder = OptionsProbe()
    loader = get_savable_loader(dataset, options=options)
    # Set after the loader was made: a worker that read the environment would fail on it.
    monkeypatch.setenv("STOKER_PREFETCH_THREADS", "many")
    with loader:
        batches = list(loader)
    assert sum(len(b["keys"]) for b in batches) == 24
    assert {b["options"] for b in batches} == {options}
    assert {b["read_ahead"] for b in batches} == {(1 << 20, 3)}
    pids = {b["pid"] for b in batches}
    assert (pids == {os.getpid()}) if workers == 0 else (len(pids) == 2 and os.getpid() not in pids)
    with pytest.raises(ConfigError, match="STOKER_PREFETCH_THREADS='many'"):
        current()  # outside the loader, this process's own defaults (from its environment)


def test_a_bad_options_argument_or_environment_fails_at_get_loader(
    dataset_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = train_dataset(dataset_path, 2)
    with pytest.raises(ConfigError, match=r"^options='fast' must be a stoker.LoaderOptions"):
        get_loader(dataset, options="fast")  # type: ignore[arg-type]
    monkeypatch.setenv("STOKER_BATCH_SLOTS_MB", "-1")
    with pytest.raises(ConfigError, match=r"^STOKER_BATCH_SLOTS_MB='-1' is not a number >= 0"):
        get_loader(dataset)  # the defaults are read here, in the main process, once
