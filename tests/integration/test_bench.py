"""``stoker bench`` on real prepared datasets: the table, JSON and HTML it writes, the user's task
encoder, a metadataset, and the data-wait figure at both ends (loader-bound, step-bound)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from stoker.preview.bench import BenchRun, BenchSettings, recommend, run_bench
from stoker.preview.bench_measure import read_stats
from stoker.preview.bench_report import format_report
from tests.httpserver import RangeServer
from tests.integration._images import make_image_dataset

HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"

SLOW_ENCODER = '''
import time
from stoker import DefaultTaskEncoder

class SlowEncoder(DefaultTaskEncoder):
    """Throttles loading: 10 ms per sample."""

    def encode_sample(self, sample):
        time.sleep(0.01)
        return super().encode_sample(sample)
'''


def stoker(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's shape: an image-caption dataset, 3 train shards of 16."""
    root = tmp_path_factory.mktemp("bench") / "images"
    make_image_dataset(root, {"train": {"train_a": 16, "train_b": 16, "train_c": 16}})
    return root


def test_table_json_and_html_on_an_image_dataset(images: Path, tmp_path: Path) -> None:
    report = tmp_path / "bench.html"
    args = ["bench", str(images), "--workers", "2,0", "--batches", "6", "--batch-size", "4"]
    result = stoker(*args, "--consumer-ms", "5", "--html", str(report))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{images} [train]: batch size 4, 6 batches per setting")
    assert re.split(r"\s{2,}", lines[2].strip()) == [
        "workers", "samples/s", "first batch", "peak RSS", "data wait", "bottleneck",
    ]  # fmt: skip
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[4:6]]
    assert [row[0] for row in rows] == ["0", "2"]  # sorted worker counts
    for row in rows:
        assert float(row[1].replace(",", "")) > 0
        assert re.fullmatch(r"\d+\.\d\d s", row[2]) and row[3].endswith("MiB")
        assert re.fullmatch(r"\d+%", row[4])
        assert row[5] in ("training step", "read", "decode", "batch", "transport")  # stats()
    assert re.search(r"^recommended: num_workers=[02], prefetch_factor=", result.stdout, re.M)
    page = report.read_text()
    assert page.count("<svg") == 4  # throughput, data wait, memory, stages (from stats())
    names = ("throughput", "data-wait", "memory", "stages")
    assert all(f'id="plot-{name}"' in page for name in names)
    assert "<script" not in page and "http" not in page.split("<svg", 1)[0]


def test_json_counts_samples_and_the_users_task_encoder_runs(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stoker.cli.bench import command

    (tmp_path / "cli_encoders.py").write_text(SLOW_ENCODER)
    monkeypatch.chdir(tmp_path)  # the module is found beside the user, as with `python -m`
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = CliRunner().invoke(command, [
        str(images), "--workers", "0,2", "--batches", "4", "--batch-size", "4",
        "--task-encoder", "cli_encoders:SlowEncoder", "--image-decode", "torchrgb8", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["settings"]["task_encoder"] == "cli_encoders:SlowEncoder"
    runs = {run["workers"]: run for run in data["runs"]}
    assert set(runs) == {0, 2}
    for run in runs.values():
        assert run["batches"] == 4 and run["samples"] == 16
        assert run["peak_rss"] > 0 and run["first_batch_s"] > 0
    # 10 ms per sample in the user's encode_sample caps one process near 100 samples/s.
    assert runs[0]["samples_per_s"] < 100
    # Two worker processes hold more memory than the main process alone.
    assert runs[2]["peak_rss"] > runs[0]["peak_rss"]
    assert data["recommendation"]["workers"] in (0, 2)


def test_a_metadataset_blend(images: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    make_image_dataset(other, {"train": {"train_x": 12}})
    blend = tmp_path / "blend.yaml"
    body = f"""\
          train:
            blend:
              - weight: 3
                path: {images}
              - weight: 1
                path: {other}
    """
    blend.write_text(HEADER + textwrap.indent(textwrap.dedent(body), "  "))
    settings = BenchSettings(str(blend), workers=(0, 2), batches=3, batch_size=4)
    report = run_bench(settings)
    assert [(run.workers, run.batches, run.samples) for run in report.runs] == [
        (0, 3, 12),
        (2, 3, 12),
    ]
    assert all(run.samples_per_s > 0 and run.peak_rss for run in report.runs)
    lines = format_report(report)
    assert lines[0].startswith(f"{blend} [train]: batch size 4, 3 batches per setting")


def test_bad_options_say_what_to_change(images: Path) -> None:
    from stoker.cli.bench import command

    result = CliRunner().invoke(command, [str(images), "--workers", "two"])
    assert result.exit_code == 2
    assert "cannot read worker counts from 'two'" in result.output
    result = CliRunner().invoke(command, [str(images), "--task-encoder", "no_such_module:Enc"])
    assert result.exit_code == 2
    assert "cannot load the task encoder 'no_such_module:Enc'" in result.output


def test_data_wait_near_one_when_loading_is_slow_and_near_zero_behind_a_slow_step(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_encoders.py").write_text(SLOW_ENCODER)
    monkeypatch.syspath_prepend(str(tmp_path))
    slow = BenchSettings(
        str(images), workers=(0,), batches=3, batch_size=4, task_encoder="my_encoders:SlowEncoder"
    )
    (loader_bound,) = run_bench(slow).runs
    assert loader_bound.wait_frac > 0.9
    # A step long enough that two workers stay ahead even on a loaded machine (at 100 ms the
    # wait reached 0.1 now and then when the suite ran beside other processes).
    fast = BenchSettings(str(images), workers=(2,), batches=6, batch_size=2, consumer_ms=250)
    report = run_bench(fast)
    assert report.runs[0].wait_frac < 0.1
    assert report.recommendation.workers == 2


def run(workers: int, samples_per_s: float, wait: float) -> BenchRun:
    return BenchRun(workers, 10, 10, 1.0, samples_per_s, 0.1, wait, None, None, {}, None, None)


def test_recommendation_rules() -> None:
    # With a training step: the fewest workers that keep the wait under 5 %.
    chosen = recommend([run(0, 100, 0.9), run(2, 190, 0.03), run(4, 200, 0.0)], consumer_ms=50)
    assert (chosen.workers, chosen.prefetch_factor) == (2, 4)  # keeps up, with bursts
    # Nothing keeps up: the fastest, said to be data-bound.
    chosen = recommend([run(0, 100, 0.9), run(2, 150, 0.6)], consumer_ms=50)
    assert chosen.workers == 2 and chosen.reason.startswith("data-bound at every setting")
    # No training step: the fewest workers within 10 % of the best.
    chosen = recommend([run(0, 100, 1), run(2, 185, 1), run(4, 200, 1)], consumer_ms=0)
    assert (chosen.workers, chosen.prefetch_factor) == (2, 2)
    assert recommend([run(0, 100, 1)], 0).prefetch_factor is None


class _StatsLoader:
    def __init__(self, stats: Any) -> None:
        self._stats = stats

    def stats(self) -> Any:
        return self._stats


def test_loader_stats_are_read_when_the_loader_has_them() -> None:
    assert read_stats(object()) is None
    view = read_stats(
        _StatsLoader(
            {
                "bottleneck": "encode_sample",
                "stage_seconds": {"read": 0.5, "encode_sample": {"seconds": 4}},
                "data_wait": {"fraction": 0.8},
                "skipped": {"decode_error": 2, "filtered": 1},
            }
        )
    )
    assert view is not None
    assert view.bottleneck == "encode_sample"
    assert view.stage_seconds == {"read": 0.5, "encode_sample": 4.0}
    assert (view.wait_frac, view.skipped) == (0.8, 3)


def test_a_url_is_benched_over_http(
    images: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STOKER_STORAGE_CONFIG", raising=False)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    server = RangeServer(str(images.parent)).start()
    try:
        settings = BenchSettings(f"{server.url}/images", workers=(0,), batches=3, batch_size=4)
        (run,) = run_bench(settings).runs
        paths = {path for _, path, _ in server.log()}
    finally:
        server.stop()
    assert (run.batches, run.samples) == (3, 12)
    assert any(p.startswith("/images/train_") and p.endswith(".tar") for p in paths)


def test_html_report_adds_a_stage_plot_when_the_loader_reports_stages(images: Path) -> None:
    import dataclasses

    from stoker.preview.bench_html import render_bench_html

    report = run_bench(BenchSettings(str(images), workers=(0,), batches=2, batch_size=4))
    assert 'id="plot-stages"' in render_bench_html(report)  # stoker's loader.stats()
    assert report.runs[0].stage_seconds["decode"] > 0
    unstaged = dataclasses.replace(
        report, runs=[dataclasses.replace(run, stage_seconds={}) for run in report.runs]
    )
    assert "plot-stages" not in render_bench_html(unstaged)  # a loader without stats()
    staged = dataclasses.replace(  # as a loader with stats() would report them
        report,
        runs=[
            dataclasses.replace(
                run, bottleneck="decode", stage_seconds={"read": 0.1, "decode": 0.4}
            )
            for run in report.runs
        ],
    )
    page = render_bench_html(staged)
    assert page.count("<svg") == 4 and 'id="plot-stages"' in page
    assert "<td>decode</td>" in page  # the named stage is the bottleneck column


def test_seconds_measures_for_that_long(images: Path) -> None:
    settings = BenchSettings(str(images), workers=(0,), seconds=0.5, batch_size=2, consumer_ms=20)
    (run,) = run_bench(settings).runs
    assert run.seconds >= 0.5
    # Counted, not timed: every step sleeps 20 ms at least, so a run that went on past 0.5 s
    # would show more than 0.5 / 0.02 + 1 batches and the first (training data never ends).
    assert 5 <= run.batches <= 27 and run.samples == 2 * run.batches


def test_hold_keeps_batches_as_the_users_loop_does(images: Path) -> None:
    from stoker.cli.bench import command

    result = CliRunner().invoke(command, [
        str(images), "--workers", "2", "--batches", "6", "--batch-size", "2", "--hold", "3",
        "--image-decode", "torchrgb8", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["settings"]["hold"] == 3
    (run,) = data["runs"]
    assert run["batches"] == 6 and run["samples"] == 12
    assert run["stats"]["slot_waits"] == 0 or run["stats"]["slot_wait_max_s"] <= 2.0
    refused = CliRunner().invoke(command, [str(images), "--hold", "0"])
    assert refused.exit_code != 0 and "--hold" in refused.output


def test_worker_types_side_by_side(images: Path) -> None:
    from stoker.cli.bench import command

    result = CliRunner().invoke(command, [
        str(images), "--workers", "2", "--batches", "3", "--batch-size", "4",
        "--image-decode", "torchrgb8", "--worker-types", "fork,thread", "--json",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    runs = {run["worker_type"]: run for run in json.loads(result.stdout)["runs"]}
    assert set(runs) == {"fork", "thread"}
    assert all(run["samples"] == 12 and run["workers"] == 2 for run in runs.values())
    # Thread workers are no copies of the process: the tree holds less than with forks.
    assert runs["thread"]["peak_rss"] < runs["fork"]["peak_rss"]
    bad = CliRunner().invoke(command, [str(images), "--worker-types", "fork,green"])
    assert bad.exit_code != 0 and "worker_type='green' is not a worker type" in bad.output
