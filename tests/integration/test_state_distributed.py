"""Save on 2 ranks x 2 workers, restore in fresh process groups on other topologies.

Real processes on CPU with the gloo backend (one ``torch.multiprocessing.spawn`` per topology).
The plan is defined over 4 virtual workers, so the global sequence of micro-batches (step ``s``:
rank 0's, rank 1's, ...) does not depend on the topology: whatever the ranks and workers a run
resumes on, the batches after the save must be those the uninterrupted run yields.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from tests.conftest import write_shard

mp = pytest.importorskip("torch.multiprocessing")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")

SAVE_WORLD, SAVE_WORKERS = 2, 2
STEPS = 4  # steps before the save: 8 micro-batches, which 1, 2 and 4 ranks all split evenly
AFTER = 12  # global micro-batches compared after the save (crosses the end of epoch 0)
STOKER = str(Path(sys.executable).parent / "stoker")


def interleave(per_rank: list[list[Any]]) -> list[Any]:
    """Global order: step ``s`` holds rank 0's micro-batch, then rank 1's, ..."""
    steps = {len(batches) for batches in per_rank}
    assert len(steps) == 1, f"ranks yielded different numbers of batches: {steps}"
    return [batches[i] for i in range(steps.pop()) for batches in per_rank]


def spawn(world: int, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``_state_rank.run_rank`` on ``world`` ranks; each rank's report."""
    from tests.integration._state_rank import run_rank

    mp.spawn(run_rank, args=(world, spec), nprocs=world, join=True)
    out = Path(spec["out"])
    return [json.loads((out / f"{spec['tag']}_rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """42 TextSamples (6 shards x 7); a 2x2 run saved after 4 steps, and its global sequences."""
    tmp = tmp_path_factory.mktemp("state_dist")
    root = tmp / "ds"
    for s in range(6):
        write_shard(
            root / f"shard_{s}.tar",
            [(f"s{s}_{i:02d}", {"txt": f"text {s}.{i}".encode()}) for i in range(7)],
        )
    prepare_dataset(
        str(root),
        split_ratio="1,0,0",
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    out = tmp / "out"
    out.mkdir()
    spec: dict[str, Any] = {
        "mode": "save",
        "tag": "save",
        "dataset": str(root),
        "out": str(out),
        "workers": SAVE_WORKERS,
        "steps": STEPS,
        "after": AFTER // SAVE_WORLD,
        "states_file": str(out / "states.pt"),
        "redist_file": str(out / "redist4.pt"),
    }
    reports = spawn(SAVE_WORLD, spec)
    # Re-cut the saved states for 4 ranks x 1 worker, as an operator would before resuming.
    cmd = [STOKER, "checkpoint", "redist", spec["states_file"], spec["redist_file"]]
    redist = subprocess.run(
        [*cmd, "--new-world-size", "4", "--num-workers", "1"],
        capture_output=True,
        text=True,
    )
    return {"spec": spec, "reports": reports, "redist": redist}


def expected_after(saved: dict[str, Any]) -> list[Any]:
    reference = interleave([r["reference"] for r in saved["reports"]])
    return reference[STEPS * SAVE_WORLD :]


def test_save_state_global_gathers_on_rank_0_and_does_not_disturb(saved: dict[str, Any]) -> None:
    reports = saved["reports"]
    assert [r["topology"] for r in reports] == [[0, 2], [1, 2]]
    assert [r["gathered"] for r in reports] == [SAVE_WORLD, None]
    for report in reports:
        assert report["head"] + report["tail"] == report["reference"]
    after = expected_after(saved)
    assert len(after) == AFTER
    assert len({json.dumps(b) for b in after}) == AFTER, "distinct batches expected"


@pytest.mark.parametrize(
    ("world", "workers", "methods"),
    [
        (2, 2, ["global_all", "rank"]),
        (1, 4, ["global_all"]),
        # the last two restore from the file `stoker checkpoint redist` wrote
        (4, 1, ["global_src0", "global_all", "redist_rank", "redist_global"]),
    ],
    ids=["2x2", "1x4", "4x1"],
)
def test_restore_in_a_fresh_process_group_continues_the_global_sequence(
    saved: dict[str, Any], world: int, workers: int, methods: list[str]
) -> None:
    assert saved["redist"].returncode == 0, saved["redist"].stderr
    spec = {
        **saved["spec"],
        "mode": "restore",
        "tag": f"restore_{world}x{workers}",
        "workers": workers,
        "after": AFTER // world,
        "methods": methods,
    }
    reports = spawn(world, spec)
    assert [r["topology"] for r in reports] == [[r, world] for r in range(world)]
    expected = expected_after(saved)
    for method in methods:
        got = interleave([r[method] for r in reports])
        assert got == expected, f"{world}x{workers} restored with {method} diverged"


def test_checkpoint_cli_info_and_redist(saved: dict[str, Any]) -> None:
    redist = saved["redist"]
    assert redist.returncode == 0, redist.stderr
    assert "Wrote 4 rank states" in redist.stdout

    spec = saved["spec"]
    info = subprocess.run(
        [STOKER, "checkpoint", "info", spec["states_file"]], capture_output=True, text=True
    )
    assert info.returncode == 0, info.stderr
    assert "2 rank(s) x 2 worker(s), 4 virtual workers" in info.stdout
    assert f"{STEPS * SAVE_WORLD} micro-batches consumed" in info.stdout
    assert "streams saved     4, exhausted 0" in info.stdout

    as_json = subprocess.run(
        [STOKER, "checkpoint", "info", spec["redist_file"], "--json"],
        capture_output=True,
        text=True,
    )
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert (report["ranks"], report["num_workers"], report["virtual_workers"]) == (4, 1, 4)
    assert report["consumed_micro_batches"] == STEPS * SAVE_WORLD
    assert len(report["streams"]) == 4
