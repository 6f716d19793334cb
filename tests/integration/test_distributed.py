"""Several ranks loading one dataset: real processes under ``torchrun``, CPU, the gloo backend.

Two ranks with two dataloader workers each must split every split between them: together they
see each sample exactly once, and no sample is seen by both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration._images import make_image_dataset

dist = pytest.importorskip("torch.distributed")

WORLD_SIZE = 2
WORKER = Path(__file__).with_name("_dist_worker.py")


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_ranks_split_every_sample_exactly_once(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    keys = make_image_dataset(
        root,
        {
            "train": {"train_a": 9, "train_b": 8, "train_c": 7},
            "val": {"val_a": 6, "val_b": 5},
        },
    )
    out = tmp_path / "out"
    out.mkdir()
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={WORLD_SIZE}",
        str(WORKER),
        str(root),
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD_SIZE)]
    assert [(r["rank"], r["world_size"]) for r in reports] == [(0, 2), (1, 2)]
    assert [r["num_workers"] for r in reports] == [2, 2]
    val_counts = [len(r["val"]) for r in reports]  # global_stats: each rank's count, by rank
    assert [r["global_samples"] for r in reports] == [val_counts, val_counts]
    for split in ("val", "train"):
        seen = [report[split] for report in reports]
        assert all(seen), f"a rank saw no {split} samples"
        assert not set(seen[0]) & set(seen[1]), f"ranks overlap in {split}"
        assert sorted(seen[0] + seen[1]) == sorted(keys[split]), split
