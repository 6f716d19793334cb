"""``get_loader`` and ``get_savable_loader`` are one signature under two names (Energon's), and
both pass every argument on (``stoker.api.loaders._loader`` takes them all by name)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stoker import ConfigError, WorkerConfig, get_loader, get_savable_loader, get_val_dataset
from stoker.runtime.savable_loader import BasicDataLoader, SavableDataLoader
from tests.conftest import make_val_texts


def test_the_two_loader_functions_take_the_same_arguments() -> None:
    plain = inspect.signature(get_loader).parameters
    savable = inspect.signature(get_savable_loader).parameters
    assert list(plain) == list(savable)
    assert [p.default for p in plain.values()] == [p.default for p in savable.values()]


@pytest.mark.parametrize(
    ("function", "cls"), [(get_loader, BasicDataLoader), (get_savable_loader, SavableDataLoader)]
)
def test_each_loader_function_passes_its_arguments_on(
    function: Callable[..., Any], cls: type, tmp_path: Path
) -> None:
    root = make_val_texts(tmp_path / "ds", shards=2, per_shard=4)
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    dataset = get_val_dataset(str(root), worker_config=config, batch_size=2)
    with function(dataset, prefetch_factor=3, watchdog_timeout_seconds=9.0) as loader:
        assert type(loader) is cls
        assert loader.prefetch_factor == 3 and loader.watch.timeout == 9.0
        assert sum(len(batch.text) for batch in loader) == 8
    other = WorkerConfig(rank=0, world_size=1, num_workers=1)
    with pytest.raises(ConfigError, match="another worker_config"):
        function(dataset, worker_config=other)
