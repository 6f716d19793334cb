"""Progress lines for logs: no carriage returns or escape codes when stderr is not a terminal,
per-rank lines with an ETA, a summary line, and a note around the index build."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.format.distributed import World
from stoker.format.prepare import prepare_dataset
from stoker.format.progress import Progress, format_seconds, summary_line
from tests.conftest import make_dataset


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


def test_a_prepare_logs_plain_lines_with_the_index_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_PROGRESS_INTERVAL", "0")
    root = make_dataset(tmp_path / "ds", shards=3, per_shard=4)
    prepare_dataset(str(root), split_ratio="1,0,0", num_workers=2, progress=True)
    err = capsys.readouterr().err  # not a terminal: plain lines only
    assert "\r" not in err and "\x1b" not in err
    lines = err.splitlines()
    shards = [line for line in lines if line.startswith("Indexing shards: ")]
    assert shards[0].startswith("Indexing shards: 1/3 (33%), 4 samples, ") and "ETA " in shards[0]
    assert shards[-1].startswith("Indexing shards: 3/3 (100%), 12 samples")
    assert "done in" in shards[-1]
    build = [line for line in lines if line.startswith("Building the indexes of index.sqlite")]
    assert build[0].endswith("(12 samples; sorts on one process, no progress until done)")
    assert build[1].startswith("Building the indexes of index.sqlite - done in ")
    assert lines.index(build[0]) > lines.index(shards[-1])
