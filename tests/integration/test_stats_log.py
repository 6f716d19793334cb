"""``get_loader(..., log_stats_every=...)`` logs one line per interval on the ``stoker`` logger
with real workers (``num_workers=2``) and in process (``num_workers=0``): the samples the lines
report add up to what was yielded."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from stoker import WorkerConfig, get_loader, get_savable_loader, get_val_dataset
from stoker.errors import ConfigError
from stoker.runtime.stats_log import interval_line
from stoker.runtime.stats_view import LoaderStats
from tests.conftest import make_val_texts

SHARDS, PER_SHARD = 3, 8
LINE = re.compile(r"^stoker: [\d,]+ samples/s \(([\d,]+) samples\), waited \d+% of the last ")


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("statslog") / "ds"
    return make_val_texts(root, SHARDS, PER_SHARD)


@pytest.mark.parametrize("workers", [0, 2])
def test_lines_count_the_samples_yielded(
    texts: Path, workers: int, caplog: pytest.LogCaptureFixture
) -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    ds = get_val_dataset(str(texts), split_part="val", worker_config=config, batch_size=2)
    caplog.set_level(logging.INFO, logger="stoker")
    yielded = 0
    with get_loader(ds, log_stats_every=0.05) as loader:
        for batch in loader:
            yielded += len(batch.__key__)
            time.sleep(0.03)  # the consumer's step: a line every second batch or so
    lines = [r.getMessage() for r in caplog.records if r.name == "stoker"]
    assert yielded == SHARDS * PER_SHARD
    assert len(lines) >= 3, lines
    counts = []
    for line in lines:
        match = LINE.match(line)
        assert match, line
        counts.append(int(match.group(1).replace(",", "")))
    # The lines cover consecutive intervals: together at most what was yielded, and the
    # batches after the last line are fewer than two intervals' worth.
    assert 0 < sum(counts) <= yielded
    assert yielded - sum(counts) <= 6
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "stoker")


def test_off_by_default_and_savable_loader_too(
    texts: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = get_val_dataset(str(texts), split_part="val", worker_config=config, batch_size=4)
    caplog.set_level(logging.INFO, logger="stoker")
    with get_loader(ds) as loader:
        list(loader)
    assert not [r for r in caplog.records if LINE.match(r.getMessage())]
    with get_savable_loader(ds, log_stats_every=1e-6) as loader:
        n = len(list(loader))
    assert len([r for r in caplog.records if LINE.match(r.getMessage())]) == n


def test_bad_interval_says_what_to_pass(texts: Path) -> None:
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    ds = get_val_dataset(str(texts), split_part="val", worker_config=config, batch_size=4)
    with pytest.raises(ConfigError, match="log_stats_every=0"):
        get_loader(ds, log_stats_every=0)


def test_line_names_bottleneck_and_skips() -> None:
    before = LoaderStats(samples=10, seconds=1.0, stage_seconds={"decode": 1.0})
    now = LoaderStats(
        samples=110,
        seconds=2.0,
        data_wait_s=0.31,
        stage_seconds={"decode": 1.62, "read": 0.38},
        skipped={"decode: OSError": 3},
    )
    assert interval_line(before, now, 1.0) == (
        "stoker: 100 samples/s (100 samples), waited 31% of the last 1 s, "
        "bottleneck decode (62%), skipped 3 (decode: OSError 3)"
    )
