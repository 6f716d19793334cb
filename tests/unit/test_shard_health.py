"""A stream's shard health: a shard whose failure condemns it (a damaged shard, a storage that
spent its retry budget) is remembered for the pass, and its later samples are skipped unread,
each counted under its reason; other failures leave the shard readable."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from stoker.errors import CorruptShardError, SampleError, TransientStorageError
from stoker.pipeline.skip_policy import ErrorPolicy, ErrorTracker
from stoker.pipeline.skips import REST_OF_SHARD, STORAGE
from stoker.runtime import worker_watch
from stoker.runtime.shard_health import ShardHealth

#: What ShardHealth reads of a data source: its path and shard names.
SOURCE: Any = SimpleNamespace(path="/data/ds", shards=["a.tar", "b.tar", "c.tar"])


def _tracker() -> ErrorTracker:
    return ErrorTracker(ErrorPolicy(mode="skip", max_consecutive_failures=0))


def test_later_samples_of_a_damaged_or_unreachable_shard_are_skipped_unread_and_counted() -> None:
    health = ShardHealth()
    health.note(CorruptShardError("a member ends past the shard"), 0, 0)
    health.note(TransientStorageError("no answer after 3 tries"), 0, 1)
    tracker = _tracker()

    assert health.broken
    assert health.unread(SOURCE, 0, 0, 5, tracker)
    assert health.unread(SOURCE, 0, 1, 6, tracker)
    assert not health.unread(SOURCE, 0, 2, 7, tracker)  # its shard did not fail
    assert not health.unread(SOURCE, 1, 0, 5, tracker)  # shard 0 of another dataset
    assert tracker.skipped == {REST_OF_SHARD: 1, STORAGE: 1}
    skips = tracker.take()
    assert skips is not None
    assert skips.examples == {REST_OF_SHARD: ["a.tar#5"], STORAGE: ["b.tar#6"]}


@pytest.mark.parametrize("error", [ValueError("bad json"), SampleError("no 'jpg' part")])
def test_a_sample_failure_leaves_its_shard_readable(error: Exception) -> None:
    health = ShardHealth()
    health.note(error, 0, 1)

    assert not health.broken
    assert health.readable(0, [0, 1, 2]) == [0, 1, 2]
    assert not health.unread(SOURCE, 0, 1, 3, _tracker())


def test_a_run_of_references_stops_before_the_first_broken_shard_of_its_dataset() -> None:
    health = ShardHealth()
    health.note(CorruptShardError("truncated"), 2, 1)

    assert health.readable(2, [0, 0, 1, 0]) == [0, 0]
    assert health.readable(2, [1, 0]) == []
    assert health.readable(1, [0, 1]) == [0, 1]  # another dataset's shard 1


def test_a_sample_a_stuck_worker_was_on_is_skipped_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_watch, "skipped", frozenset({(0, 2, 7)}))
    tracker = _tracker()

    assert ShardHealth().unread(SOURCE, 0, 2, 7, tracker)
    assert not ShardHealth().unread(SOURCE, 0, 2, 8, tracker)
    assert tracker.skipped == {worker_watch.STUCK: 1}
