"""Resumable prepare: ``kill -9`` half-way, run again, and get the bytes of an uninterrupted run."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import snapshot, write_shard

Image = pytest.importorskip("PIL.Image")

SHARDS = 40
PER_SHARD = 40
WORK = ".nv-meta/.stoker-work"


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), (200, 10, 10)).save(buf, format="JPEG")
    return buf.getvalue()


def make_many_shards(root: Path, shards: int = SHARDS, per_shard: int = PER_SHARD) -> Path:
    jpeg = _jpeg()
    for s in range(shards):
        samples = [
            (f"s{s:04d}_{i:03d}", {"jpg": jpeg, "txt": f"caption {s} {i}".encode()})
            for i in range(per_shard)
        ]
        write_shard(root / f"part_{s // 16}" / f"shard_{s:04d}.tar", samples)
    return root


def prepare_command(path: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "stoker.cli",
        "prepare",
        str(path),
        "--non-interactive",
        "--split-ratio",
        "8,1,1",
        "--shuffle-tars",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        '{"image": "jpg", "caption": "txt"}',
        "--media-metadata-by-extension",
        "--num-workers",
        "1",
        "--no-progress",
        "--json",
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}


HOLD = Path(__file__).with_name("_prepare_hold.py")
HOLD_AT = 10  # shard results on disk when the killed prepare holds


def held_prepare(command: list[str], marker: Path, hold_at: int) -> subprocess.Popen[bytes]:
    """``command`` (a ``stoker prepare``) started so that it holds, never to finish, once a
    process of it has stored ``hold_at`` shard results; ``marker`` appears then."""
    return subprocess.Popen(
        [sys.executable, str(HOLD), str(hold_at), str(marker), *command[command.index("prepare"):]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
    )  # fmt: skip


def wait_for(marker: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 300  # a hang guard only: the held prepare cannot finish
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), f"prepare never held (exit status {proc.poll()})"
    assert proc.poll() is None, "prepare ended while held"


def run_prepare(path: Path) -> dict[str, object]:
    proc = subprocess.run(prepare_command(path), capture_output=True, text=True, env=_env())
    assert proc.returncode == 0, proc.stderr
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def test_sigkill_half_way_then_rerun_gives_identical_bytes(tmp_path: Path) -> None:
    killed = make_many_shards(tmp_path / "killed")
    fresh = tmp_path / "fresh"
    shutil.copytree(killed, fresh)
    proc = held_prepare(prepare_command(killed), tmp_path / "held", HOLD_AT)
    wait_for(tmp_path / "held", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    work = killed / WORK
    kept = len(list((work / "shard").rglob("*.npz")))
    assert kept == HOLD_AT  # the one indexing process stored that many, then held
    assert not (killed / ".nv-meta" / ".info.json").exists()  # nothing published

    report = run_prepare(killed)
    assert report["resumed_shards"] == kept  # the finished shards were not read again
    assert run_prepare(fresh)["resumed_shards"] == 0
    assert not work.exists()  # removed after publish
    assert not [p for p in killed.rglob("*") if ".stoker-tmp-" in p.name]
    got, expected = snapshot(killed), snapshot(fresh)
    assert sorted(got) == sorted(expected)
    assert len([name for name in got if name.endswith(".tar.idx")]) == SHARDS
    for name, data in expected.items():
        assert got[name] == data, f"{name} differs"


def test_changed_shard_is_read_again(tmp_path: Path) -> None:
    from stoker.format.prepare import index_shards

    root = make_many_shards(tmp_path / "ds", shards=3, per_shard=2)
    with pytest.raises(RuntimeError), index_shards(str(root), num_workers=1):
        raise RuntimeError("stop before publish: the work folder stays")
    shard = root / "part_0" / "shard_0001.tar"
    write_shard(shard, [("other_key", {"txt": b"changed"})])
    os.utime(shard, ns=(1, 1))  # a different mtime even on coarse file systems
    with index_shards(str(root), num_workers=1) as pending:
        assert pending.resumed == 2
        assert pending.counts["part_0/shard_0001.tar"] == 1


def test_stale_temporary_files_are_removed_at_start(tmp_path: Path) -> None:
    from stoker.format.prepare import prepare_dataset

    root = make_many_shards(tmp_path / "ds", shards=2, per_shard=2)
    leftovers = [
        root / "part_0" / "shard_0000.tar.idx.stoker-tmp-0123456789ab",
        root / ".nv-meta" / "index.sqlite.stoker-tmp-0123456789ab",
        root / WORK / "shard" / "00" / "x.npz.stoker-tmp-0123456789ab",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half written")
    prepare_dataset(str(root), split_ratio="1,0,0", num_workers=1)
    assert not [p for p in root.rglob("*") if ".stoker-tmp-" in p.name]
    assert not (root / WORK).exists()


def test_media_records_are_resumed_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stoker.format.prepare import index_shards
    from stoker.media import prepare as media_prepare
    from stoker.media.extract import MediaFilter

    root = make_many_shards(tmp_path / "ds", shards=3, per_shard=2)
    media = MediaFilter.parse(extension=True)
    with index_shards(str(root), num_workers=1) as pending:  # left without publishing
        assert media_prepare.media_into_pending(pending, media, num_workers=1).files == 6
    assert len(list((root / WORK).rglob("*.npz"))) == 6  # 3 shard indexes, 3 media results

    def must_not_probe(*args: object) -> None:
        raise AssertionError("a finished shard was probed again")

    monkeypatch.setattr(media_prepare, "scan_shard_media", must_not_probe)
    with index_shards(str(root), num_workers=1) as pending:
        report = media_prepare.media_into_pending(pending, media, num_workers=1)
        assert (report.files, report.failed) == (6, 0)
        assert pending.resumed == 3


def test_workers_end_when_prepare_is_killed(tmp_path: Path) -> None:
    dataset = make_many_shards(tmp_path / "ds")
    command = [*prepare_command(dataset)]
    command[command.index("--num-workers") + 1] = "2"
    proc = held_prepare(command, tmp_path / "held", 1)
    wait_for(tmp_path / "held", proc)  # one worker holds, so the prepare never ends
    main = psutil.Process(proc.pid)
    deadline = time.monotonic() + 300  # a hang guard only
    workers: list[psutil.Process] = []
    while time.monotonic() < deadline and len(workers) < 2:
        workers = main.children(recursive=True)
        time.sleep(0.02)
    assert len(workers) >= 2, f"prepare has {len(workers)} workers, not 2"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _gone, alive = psutil.wait_procs(workers, timeout=60)  # they end by themselves
    assert not alive, f"indexing workers outlived the killed prepare: {alive}"
