"""Progress lines for logs: no carriage returns or escape codes when stderr is not a terminal."""

from __future__ import annotations

import pytest

from stoker.format.distributed import World
from stoker.format.progress import Progress, format_seconds, summary_line


def test_log_lines_name_the_rank_and_carry_no_escape_codes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_PROGRESS_INTERVAL", "0")
    bar = Progress(4, "Indexing shards", world=World(rank=2, size=4))
    for _ in range(4):
        bar.update(samples=10)
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    assert lines[0].startswith("rank 2/4: Indexing shards: 1/4 (25%), 10 samples, ")
    assert "ETA " in lines[0]
    assert lines[-1].startswith("rank 2/4: Indexing shards: 4/4 (100%), 40 samples")
    assert lines[-1].endswith("done in 0s")


def test_summary_and_durations() -> None:
    line = summary_line([(3, 30, 2.0), (2, 20, 65.0)], 5)
    assert line == "all 2 ranks: 5/5 shards, 50 samples; slowest rank 1 took 1m05s, fastest 2s"
    assert [format_seconds(s) for s in (5, 3725, float("inf"))] == ["5s", "1h02m", "?"]
