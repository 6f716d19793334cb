"""Distributed ``pack`` and ``prepare``: 4 ranks under ``torchrun`` (gloo) write the same bytes as
one process, and Energon loads the result."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from stoker.format.distributed import assign_shards
from tests.conftest import make_dataset, snapshot
from tests.integration._prepare_ranks import main as run_commands

Image = pytest.importorskip("PIL.Image")

RANKS = 4
SCRIPT = Path(__file__).with_name("_prepare_ranks.py")
PROBE = Path(__file__).with_name("energon_probe.py")


def make_sources(root: Path) -> None:
    raw = root / "raw"
    for i in range(11):
        folder = raw / f"group{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        Image.new("RGB", (8 + i, 6), (20 * i, 100, 200 - 10 * i)).save(buf, format="JPEG")
        (folder / f"img{i:02d}.jpg").write_bytes(buf.getvalue())
        (folder / f"img{i:02d}.txt").write_text(f"caption {i}")
    lines = [json.dumps({"text": f"line {i}", "n": i}) for i in range(10)]
    (root / "texts.jsonl").write_text("\n".join(lines) + "\n")


def test_assign_shards_splits_each_shard_to_exactly_one_rank() -> None:
    items = [f"s{i}.tar" for i in range(10)]
    shares = [assign_shards(items, r, 4) for r in range(4)]
    assert sorted(x for share in shares for x in share) == sorted(items)
    assert [len(s) for s in shares] == [3, 3, 2, 2]
    assert shares == [assign_shards(items, r, 4) for r in range(4)]  # the same on every run


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_four_ranks_write_the_bytes_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    single, distributed = tmp_path / "single", tmp_path / "distributed"
    make_sources(single)
    shutil.copytree(single, distributed)
    run_commands(str(single), distributed=False)

    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={RANKS}",
        str(SCRIPT),
        str(distributed),
        "--distributed",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr

    got, expected = snapshot(distributed), snapshot(single)
    assert sorted(got) == sorted(expected)
    assert len([n for n in got if n.startswith("images/") and n.endswith(".tar")]) == 6
    assert len([n for n in got if n.startswith("texts/") and n.endswith(".tar.idx")]) == 4
    assert not [n for n in got if ".stoker-work" in n or ".stoker-tmp-" in n]
    for name, data in expected.items():
        assert got[name] == data, f"{name} differs"
    with sqlite_rows(distributed / "images/.nv-meta/index.sqlite") as count:
        assert count == 11  # media metadata of every image

    probe = subprocess.run(
        [sys.executable, str(PROBE), str(distributed / "images"), "train"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    rows = [json.loads(line) for line in probe.stdout.splitlines() if line.startswith("{")]
    assert sorted(row["caption"] for row in rows) == sorted(f"caption {i}" for i in range(11))


class sqlite_rows:
    """``with sqlite_rows(db) as n``: the number of media metadata rows of an index file."""

    def __init__(self, db: Path) -> None:
        import sqlite3

        self._db = sqlite3.connect(f"file:{db}?mode=ro", uri=True)

    def __enter__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM media_metadata").fetchone()[0])

    def __exit__(self, *exc: object) -> None:
        self._db.close()


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_a_failed_rank_stops_all_and_the_rerun_resumes(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", shards=8, per_shard=3)
    good = (root / "shard_006.tar").read_bytes()
    (root / "shard_006.tar").write_bytes(b"garbage" * 300)  # rank 2 of 4 takes shards 2 and 6
    prepare = ["prepare", "--split-ratio", "1,0,0", "--num-workers", "1", "--non-interactive"]
    torchrun = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={RANKS}",
        "-m",
        "stoker.cli",
        *prepare,
        "--distributed",
        str(root),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "STOKER_PROGRESS_INTERVAL": "0"}
    failed = subprocess.run(torchrun, capture_output=True, text=True, timeout=240, env=env)
    assert failed.returncode != 0
    assert "rank 2 of 4 failed" in failed.stderr and "not a tar archive" in failed.stderr
    assert not (root / ".nv-meta" / ".info.json").exists()
    assert len(list((root / ".nv-meta/.stoker-work/shard").rglob("*.npz"))) == 7

    (root / "shard_006.tar").write_bytes(good)
    done = subprocess.run(torchrun, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    assert "Resumed 7 shards indexed by an interrupted run." in done.stdout
    assert "all 4 ranks: 8/8 shards, 24 samples" in done.stderr
    assert "rank 3/4: Indexing shards: 2/2 (100%), 6 samples" in done.stderr
    assert "\r" not in done.stderr and "\x1b" not in done.stderr

    single = make_dataset(tmp_path / "single", shards=8, per_shard=3)
    one = [sys.executable, "-m", "stoker.cli", *prepare, str(single)]
    assert subprocess.run(one, capture_output=True, env=env).returncode == 0
    assert snapshot(root) == snapshot(single)
