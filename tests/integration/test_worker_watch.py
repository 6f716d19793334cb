"""A dataloader worker stuck on a sample (``SIGSTOP``) or killed on one (``SIGKILL``, as the OOM
killer does), under ``on_worker_failure="replace"`` at two workers: the run goes on soon after
the timeout, the stuck worker's stack is logged, and over the epoch every sample but the one the
worker was on arrives exactly once (checked by key); that one is counted as skipped.

The worker stops or kills itself inside ``encode_sample`` on one chosen key, so the failure
happens mid-sample and mid-epoch whatever the machine's speed (no timed signals).
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset
from stoker.runtime.worker_watch import STUCK
from tests.integration._images import make_image_dataset

TIMEOUT = 2.0
#: The sample the worker fails on: mid-epoch, in the middle of its shard.
FAILING = "train_a_06"


def hang_here(marker: Path) -> None:
    """Stop this worker (as a debugger or a stuck NFS read would) and then wait forever."""
    marker.write_text(str(time.monotonic()))
    os.kill(os.getpid(), signal.SIGSTOP)
    threading.Event().wait(600)  # woken by the watch's SIGCONT: still stuck


class FailOnOne(DefaultTaskEncoder):  # type: ignore[type-arg]
    def __init__(self, marker: Path, how: str) -> None:
        super().__init__()
        self.marker, self.how = marker, how

    def encode_sample(self, sample: Any) -> Any:
        if sample.__key__ == FAILING:
            if self.how == "stop":
                hang_here(self.marker)
            else:
                self.marker.write_text(str(time.monotonic()))
                os.kill(os.getpid(), signal.SIGKILL)
        return sample


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("watch") / "ds"
    keys = make_image_dataset(root, {"train": {"train_a": 12, "train_b": 10}})
    return root, keys["train"]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_failed_worker_is_replaced_and_only_its_sample_is_lost(
    dataset: tuple[Path, list[str]], tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    root, keys = dataset
    marker = tmp_path / "failed_at"
    train = get_train_dataset(
        root, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2), batch_size=1,
        shuffle_buffer_size=None, max_samples_per_sequence=None, repeat=False,
        task_encoder=FailOnOne(marker, how),
    )  # fmt: skip
    arrived: list[tuple[str, float]] = []
    with caplog.at_level(logging.WARNING, logger="stoker"):
        loader = get_loader(train, watchdog_timeout_seconds=TIMEOUT, on_worker_failure="replace")
        with loader:
            for batch in loader:
                arrived.append((batch.__key__[0], time.monotonic()))
    seen = collections.Counter(key for key, _ in arrived)
    assert sorted(seen) == sorted(set(keys) - {FAILING})
    assert set(seen.values()) == {1}  # nothing lost, nothing twice
    assert loader.workers_replaced == 1
    skipped = loader.skipped()
    assert skipped.by_reason == {STUCK: 1}
    assert loader.stats().skipped == {STUCK: 1}
    # the run went on soon after the timeout (a generous bound: the machine is loaded)
    failed_at = float(marker.read_text())
    after = [at for _, at in arrived if at > failed_at]
    assert after and after[0] - failed_at < TIMEOUT + 2 + 10
    if how == "stop":
        assert "stuck for" in caplog.text
        assert "in hang_here" in caplog.text  # the worker's own stack, from faulthandler
        assert "in encode_sample" in caplog.text
    else:
        assert "exited unexpectedly (exit code -9)" in caplog.text
