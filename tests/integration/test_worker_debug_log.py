"""``WorkerConfig(worker_debug_path=...)`` with real workers (``num_workers=2``) and in process
(``num_workers=0``): one JSON line per batch in each producer's file, named by Energon's
``{worker_id}``, holding the keys of the batch the loop got; ``analyze-debug`` reads them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from stoker import WorkerConfig, get_loader, get_val_dataset
from stoker.cli.analyze_debug import command as analyze_debug
from stoker.cli.energon_tools import analyze_debug_command
from stoker.errors import ConfigError
from stoker.runtime.debug_log import BATCH_LINE, YIELD_LINE
from tests.conftest import make_val_texts

SHARDS, PER_SHARD = 3, 8


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("debuglog") / "ds"
    return make_val_texts(root, SHARDS, PER_SHARD)


def load(texts: Path, workers: int, debug: Path) -> list[list[str]]:
    config = WorkerConfig(
        rank=0,
        world_size=1,
        num_workers=workers,
        worker_debug_path=str(debug / "worker_{worker_id}.jsonl"),
    )
    ds = get_val_dataset(str(texts), split_part="val", worker_config=config, batch_size=3)
    with get_loader(ds) as loader:
        return [list(batch.__key__) for batch in loader]


@pytest.mark.parametrize("workers", [0, 2])
def test_one_line_per_batch_per_worker(texts: Path, tmp_path: Path, workers: int) -> None:
    yielded = load(texts, workers, tmp_path / "debug")
    # Energon's numbering: the training process is 0, worker w of rank 0 is w + 1.
    names = ["worker_0.jsonl"] if workers == 0 else ["worker_1.jsonl", "worker_2.jsonl"]
    files = sorted(p.name for p in (tmp_path / "debug").iterdir())
    assert files == sorted({"worker_0.jsonl", *names})
    everything = {}
    for name in files:
        with (tmp_path / "debug" / name).open() as f:
            everything[name] = [json.loads(text) for text in f]
    lines = {name: [line for line in everything[name] if line["t"] == BATCH_LINE] for name in names}
    # The training process logs each batch its loop took, in order, under Energon's name.
    taken = [line for line in everything["worker_0.jsonl"] if line["t"] == YIELD_LINE]
    assert [line["keys"] for line in taken] == yielded
    assert [line["idx"] for line in taken] == list(range(len(yielded)))
    for name, own in lines.items():
        assert [line["idx"] for line in own] == list(range(len(own)))
        assert {line["worker"] for line in own} == {max(int(name[7]) - 1, 0)}
        times = [line["time"] for line in own]
        assert times == sorted(times)
    logged = sorted(tuple(line["keys"]) for own in lines.values() for line in own)
    assert logged == sorted(tuple(keys) for keys in yielded)
    assert sum(len(keys) for keys in yielded) == SHARDS * PER_SHARD

    result = CliRunner().invoke(analyze_debug, [str(tmp_path / "debug"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["batches"] == len(yielded)
    assert summary["samples"] == summary["unique_keys"] == SHARDS * PER_SHARD
    assert summary["repeated_in_epoch"] == 0
    assert sorted(summary["workers"]) == [f"0/{w}" for w in range(max(workers, 1))]
    assert summary["steps"] == len(yielded)
    heatmap = tmp_path / "heatmap.png"
    args = [str(tmp_path / "debug"), "--heatmap-path", str(heatmap)]
    text = CliRunner().invoke(analyze_debug_command, args)
    assert text.exit_code == 0 and f"total: {len(yielded)} batches" in text.output
    assert f"Analyzing {len(files)} logs" in text.output
    assert f"Found {SHARDS * PER_SHARD} unique sample keys, {len(yielded)} steps" in text.output
    with Image.open(heatmap) as picture:  # one row per key, one column per step
        assert picture.size == (len(yielded), SHARDS * PER_SHARD)
        assert int(np.count_nonzero(np.asarray(picture))) == SHARDS * PER_SHARD


def test_path_without_placeholder_is_refused_with_workers(texts: Path, tmp_path: Path) -> None:
    config = WorkerConfig(
        rank=0, world_size=1, num_workers=2, worker_debug_path=str(tmp_path / "one.jsonl")
    )
    ds = get_val_dataset(str(texts), split_part="val", worker_config=config, batch_size=3)
    with pytest.raises(ConfigError, match="worker_id"):
        get_loader(ds)


def test_analyze_debug_says_what_to_pass(tmp_path: Path) -> None:
    (tmp_path / "other.jsonl").write_text('{"t": "yield_batch", "keys": ["a"]}\n')
    result = CliRunner().invoke(analyze_debug, [str(tmp_path)])
    assert result.exit_code == 1 and "worker_debug_path" in result.output
