"""``stoker mix``: the planned share per dataset over the steps, from the YAML alone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from stoker.cli.main import cli
from stoker.errors import ConfigError
from stoker.metadataset.planned_mix import planned_mix

YAML = (
    "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
    "      - weight: 100\n        path: ./never_read_a\n"
    "      - weight: {linear: {0: 100, 1000: 0}}\n        path: ./never_read_b\n"
)


@pytest.fixture
def mds(tmp_path: Path) -> Path:
    path = tmp_path / "mix.yaml"
    path.write_text(YAML)
    return path


def test_planned_shares_per_window(mds: Path) -> None:
    mix = planned_mix(str(mds), 2000, windows=4)
    assert mix.starts == [0, 500, 1000, 1500]
    assert [p.rsplit("/", 1)[1] for p in mix.datasets] == ["never_read_a", "never_read_b"]
    assert mix.shares[1, 2:].tolist() == [0.0, 0.0]  # the ramp is at 0 from batch 1000
    assert 0.4 < mix.shares[1, 0] < 0.5 < mix.shares[0, 0]
    assert mix.shares.sum(axis=0).round(9).tolist() == [1.0] * 4
    assert mix.knots == [1000]


@pytest.mark.parametrize(
    ("body", "shares"),
    [
        (
            "      - weight: 3\n        path: ./a\n      - weight: 1\n        path: ./b\n",
            [0.75, 0.25],
        ),
        (  # a nested blend: its datasets share their parent's weight
            "      - weight: 1\n        path: ./a\n      - weight: 1\n        path: ./inner.yaml\n",
            [0.5, 0.4, 0.1],
        ),
    ],
)
def test_constant_weights_are_planned_as_their_shares(
    tmp_path: Path, body: str, shares: list[float]
) -> None:
    """Without a schedule, every window has the weights' shares (each dataset was 1.0 before)."""
    head = YAML.split("      - weight: 100")[0]
    (tmp_path / "inner.yaml").write_text(
        head + "      - weight: 4\n        path: ./c\n      - weight: 1\n        path: ./d\n"
    )
    (tmp_path / "mix.yaml").write_text(head + body)
    mix = planned_mix(str(tmp_path / "mix.yaml"), 1000, windows=3)
    assert mix.shares.round(9).tolist() == [[s] * 3 for s in shares]
    assert mix.knots == []


def test_a_million_steps_from_the_planner_alone(mds: Path) -> None:
    started = time.process_time()
    mix = planned_mix(str(mds), 10**6, windows=100)
    spent = time.process_time() - started  # CPU time of this process: reported, not asserted
    assert mix.shares.shape == (2, 100) and mix.shares[1, 1:].max() == 0.0
    print(f"10^6 steps planned in {spent:.3f} s CPU")


def test_cli_prints_a_row_per_window_and_marks_knots(mds: Path) -> None:
    result = CliRunner().invoke(cli, ["mix", str(mds), "--steps", "2000", "--windows", "4"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["batches", "never_read_a", "never_read_b"]
    assert lines[3].split()[:3] == ["1000", "-", "1499*"]
    assert lines[3].split()[3:] == ["100.0%", "0.0%"]
    assert "at 1000" in lines[-1]


def test_epochized_blends_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "epochs.yaml"
    head = YAML.split("      - weight: {")[0]
    path.write_text(head.replace("blend:", "blend_epochized:").replace("weight:", "repetitions:"))
    with pytest.raises(ConfigError, match="epochized"):
        planned_mix(str(path), 10)
