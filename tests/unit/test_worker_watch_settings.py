"""The settings of the worker watch and of the end-of-data agreement: bad values are refused
with a message that lists the valid ones (the behaviour itself: tests/integration/
test_worker_watch.py and test_end_sync.py)."""

from __future__ import annotations

import pytest

from stoker.errors import ConfigError
from stoker.runtime.end_sync import plan_transfers
from stoker.runtime.worker_watch import WatchSettings


def test_an_unknown_failure_policy_is_refused() -> None:
    with pytest.raises(ConfigError, match="'raise', 'replace'"):
        WatchSettings(on_worker_failure="restart")


def test_replace_needs_a_timeout() -> None:
    with pytest.raises(ConfigError, match="watchdog_timeout_seconds"):
        WatchSettings(timeout=None, on_worker_failure="replace")


def test_transfers_even_out_the_ranks_and_keep_the_rest_where_it_is() -> None:
    counts = [6, 5, 0]
    rounds = sum(counts) // len(counts)
    transfers = plan_transfers(counts, rounds)
    held = list(counts)
    for src, index, dst in transfers:
        assert index >= rounds  # a rank keeps its own first batches
        held[src] -= 1
        held[dst] += 1
    assert held[2] == rounds and min(held) == rounds
    assert sum(held) - rounds * len(held) == sum(counts) % len(counts)


def test_an_unknown_sync_end_mode_is_refused() -> None:
    from stoker.runtime.end_sync import EndSync

    class _Dataset:
        repeat = False
        worker_config = None

    class _Loader:
        dataset = _Dataset()

    with pytest.raises(ConfigError, match="'equal', 'stop_first', 'redistribute'"):
        EndSync("first", _Loader())  # type: ignore[arg-type]
